// Drives the official TypeScript MCP SDK client for the Python tests, one JSON line per
// command on stdin and one JSON line per answer on stdout. Whatever the client returns is
// passed back as it is; whatever it throws is passed back as {"ok": false, "error": ...},
// so the tests see exactly what an agent host built on this SDK sees.
//
//   {"op": "connect", "url": "...", "headers": {...}}
//   {"op": "listTools"}
//   {"op": "callTool", "name": "...", "arguments": {...}}
//   {"op": "close"}
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

let client = null;
let transport = null;

async function run(command) {
  switch (command.op) {
    case "connect": {
      transport = new StreamableHTTPClientTransport(new URL(command.url), {
        requestInit: { headers: command.headers ?? {} },
      });
      client = new Client({ name: "switchboard-compat", version: "1.0.0" }, { capabilities: {} });
      await client.connect(transport);
      return {
        protocolVersion: transport.protocolVersion ?? null,
        sessionId: transport.sessionId ?? null,
        serverVersion: client.getServerVersion() ?? null,
        instructions: client.getInstructions() ?? null,
      };
    }
    case "listTools":
      return await client.listTools();
    case "callTool":
      return await client.callTool({ name: command.name, arguments: command.arguments ?? {} });
    case "close":
      await client?.close();
      return null;
    default:
      throw new Error(`unknown op ${command.op}`);
  }
}

function reply(value) {
  process.stdout.write(JSON.stringify(value) + "\n");
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  try {
    reply({ ok: true, value: await run(command) });
  } catch (error) {
    reply({ ok: false, error: { name: error?.constructor?.name ?? "Error", code: error?.code ?? null,
                                message: String(error?.message ?? error) } });
  }
  if (command.op === "close") break;
}
process.exit(0);
