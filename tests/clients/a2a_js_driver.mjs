// Drives the official A2A JavaScript SDK's client (@a2a-js/sdk) for the Python tests: fetches
// the agent card at argv[2] (the server's base URL) with the bearer token in A2A_TOKEN, sends
// a streaming message naming queue argv[3], and prints one JSON line per event it receives
// ({"kind", "state"?, "taskId", "artifact"?}), then {"history": [...]} of the finished task
// (GetTask). Whatever the client throws is printed as {"error": ...} and the exit code is 1.
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const [url, queue] = process.argv.slice(2);
const authed = (input, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  headers.set("Authorization", `Bearer ${process.env.A2A_TOKEN}`);
  return fetch(input, { ...init, headers });
};
const print = (value) => process.stdout.write(JSON.stringify(value) + "\n");

try {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authed })],
  }));
  const client = await factory.createFromUrl(url);
  let taskId = null;
  const stream = client.sendMessageStream({
    tenant: "", configuration: undefined, metadata: undefined,
    message: { messageId: crypto.randomUUID(), contextId: "", taskId: "", role: Role.ROLE_USER,
               parts: [{ content: { $case: "text", value: "Build release 8 from JS" }, metadata: undefined,
                         filename: "", mediaType: "" }],
               metadata: { queue }, extensions: [], referenceTaskIds: [] },
  });
  for await (const event of stream) {
    const { $case: kind, value } = event.payload;
    if (kind === "task") {
      taskId = value.id;
      print({ kind, taskId, state: TaskState[value.status.state] });
    } else if (kind === "statusUpdate") {
      print({ kind, taskId: value.taskId, state: TaskState[value.status.state] });
    } else if (kind === "artifactUpdate") {
      print({ kind, taskId: value.taskId, artifact: value.artifact.name });
    }
  }
  const task = await client.getTask({ tenant: "", id: taskId, historyLength: undefined });
  print({ history: task.history.map((m) => m.parts[0].content.value) });
} catch (err) {
  print({ error: String(err?.stack ?? err) });
  process.exit(1);
}
