// A test host page's script for the MCP App: @modelcontextprotocol/ext-apps' host bridge
// (AppBridge) talks to the app in a sandboxed iframe; the app's tools/call requests go to
// window.hostCallTool, which the test binds to a real MCP client against the server.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

window.startApp = async (html, theme) => {
  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.title = "Todo details, drawn by the Switchboard app";
  iframe.srcdoc = html;
  document.getElementById("host").replaceChildren(iframe);
  const bridge = new AppBridge(null, { name: "switchboard-test-host", version: "1.0.0" },
                               { serverTools: {}, openLinks: {} }, { hostContext: { theme } });
  bridge.oncalltool = async (params) => await window.hostCallTool(params);
  bridge.onopenlink = async () => ({});
  bridge.onsizechange = ({ height }) => { if (height) iframe.style.height = `${height + 4}px`; };
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  await initialized;
  window.bridge = bridge;
};

window.sendResult = (result) => window.bridge.sendToolResult(result);
window.setTheme = (theme) => window.bridge.setHostContext({ theme });
// The host relays a change it heard from the server (notifications/resources/updated).
window.relayUpdated = (uri) => window.bridge.notification({ method: "notifications/resources/updated",
                                                           params: { uri } });
