// Drives the official TypeScript MCP SDK client for the Python tests, one JSON line per
// command on stdin and one JSON line per answer on stdout. Whatever the client returns is
// passed back as it is; whatever it throws is passed back as {"ok": false, "error": ...},
// so the tests see exactly what an agent host built on this SDK sees.
//
//   {"op": "connect", "url": "...", "headers": {...}, "capabilities": {...}?}
//   {"op": "listTools"}
//   {"op": "callTool", "name": "...", "arguments": {...}}
//   {"op": "listResources"} / {"op": "listResourceTemplates"} / {"op": "readResource", "uri": "..."}
//   {"op": "subscribe", "uri": "..."}: resources/subscribe; each notifications/resources/updated
//       the client hears from then on is kept, and {"op": "updated"} returns their URIs so far
//   {"op": "waitUpdated", "uri": "...", "seen": n, "timeoutMs": ms}: waits until more than n of
//       them were for that URI; returns {"heardAt": epoch ms when the (n+1)th arrived}
//   {"op": "close"}
//   {"op": "connectOAuth", "url": "...", "redirectUrl": "...", "clientMetadataUrl": "..."?,
//    "clientInformation": {...}?, "keepClient": bool?}
//       -> {"authorizationUrl": "..."}: the SDK's OAuth discovery and registration ran (or it
//          reused clientInformation, a registration a host kept; keepClient: the registration
//          of the previous connectOAuth, and no tokens, as a host signing in again) and it
//          wants the person sent there; the test approves and passes the code on with
//   {"op": "finishAuth", "code": "..."}: the SDK exchanges it and connects again
//   {"op": "tokens"}: the tokens the SDK holds now
//   {"op": "clientInformation"}: the registration the SDK holds now
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

let client = null;
let transport = null;
let oauth = null;
const updated = [];
const updatedAt = [];  // Date.now() when each of `updated` arrived

// The SDK's OAuthClientProvider, in memory: what a host keeps in its own storage.
class MemoryProvider {
  constructor(redirectUrl, clientMetadataUrl, clientInformation) {
    this._redirectUrl = redirectUrl;
    this.clientMetadataUrl = clientMetadataUrl;
    this._client = clientInformation ?? undefined;
    this._tokens = undefined;
    this._verifier = undefined;
    this.authorizationUrl = null;
  }
  get redirectUrl() { return this._redirectUrl; }
  get clientMetadata() {
    return { client_name: "TS Host", redirect_uris: [this._redirectUrl], grant_types: ["authorization_code", "refresh_token"],
             response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  redirectToAuthorization(url) { this.authorizationUrl = url.toString(); }
  saveCodeVerifier(verifier) { this._verifier = verifier; }
  codeVerifier() { return this._verifier; }
}

async function connectWith(url) {
  transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: oauth.provider });
  client = new Client({ name: "switchboard-compat", version: "1.0.0" }, { capabilities: {} });
  await client.connect(transport);
}

async function run(command) {
  switch (command.op) {
    case "connect": {
      transport = new StreamableHTTPClientTransport(new URL(command.url), {
        requestInit: { headers: command.headers ?? {} },
      });
      client = new Client({ name: "switchboard-compat", version: "1.0.0" },
                          { capabilities: command.capabilities ?? {} });
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
        updated.push(n.params.uri);
        updatedAt.push(Date.now());
      });
      await client.connect(transport);
      return {
        protocolVersion: transport.protocolVersion ?? null,
        sessionId: transport.sessionId ?? null,
        serverVersion: client.getServerVersion() ?? null,
        instructions: client.getInstructions() ?? null,
      };
    }
    case "connectOAuth": {
      const registered = command.keepClient ? oauth?.provider.clientInformation() : undefined;
      oauth = { url: command.url, provider: new MemoryProvider(command.redirectUrl, command.clientMetadataUrl,
                                                                 command.clientInformation) };
      if (registered) oauth.provider.saveClientInformation(registered);
      try {
        await connectWith(command.url);
      } catch (error) {
        if (oauth.provider.authorizationUrl === null) throw error;
        return { authorizationUrl: oauth.provider.authorizationUrl };
      }
      return { authorizationUrl: null };
    }
    case "finishAuth": {
      await transport.finishAuth(command.code);
      await connectWith(oauth.url);
      return { protocolVersion: transport.protocolVersion ?? null };
    }
    case "tokens":
      return oauth.provider.tokens() ?? null;
    case "clientInformation":
      return oauth.provider.clientInformation() ?? null;
    case "listTools":
      return await client.listTools();
    case "callTool":
      return await client.callTool({ name: command.name, arguments: command.arguments ?? {} });
    case "listResources":
      return await client.listResources();
    case "listResourceTemplates":
      return await client.listResourceTemplates();
    case "readResource":
      return await client.readResource({ uri: command.uri });
    case "subscribe":
      return await client.subscribeResource({ uri: command.uri });
    case "updated":
      return updated;
    case "waitUpdated": {
      const deadline = Date.now() + (command.timeoutMs ?? 10000);
      for (;;) {
        const times = updatedAt.filter((_, i) => updated[i] === command.uri);
        if (times.length > command.seen) return { heardAt: times[command.seen] };
        if (Date.now() > deadline) throw new Error(`no ring for ${command.uri} after ${command.seen}: ${updated}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
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
