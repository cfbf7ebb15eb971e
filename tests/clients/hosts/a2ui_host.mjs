// A test host page's script for the A2UI todo detail resource: @a2ui/lit's v0.9 renderer
// with the basic catalog, fed the messages the test read from the server through a real MCP
// client. Bundled by the browser tests (esbuild), served by their own small HTTP server.
import { MessageProcessor } from "@a2ui/web_core/v0_9";
import { A2uiSurface, basicCatalog } from "@a2ui/lit/v0_9";

// Named so the bundle keeps the module that defines the <a2ui-surface> element.
if (!customElements.get("a2ui-surface")) customElements.define("a2ui-surface", A2uiSurface);

window.renderA2ui = (messages) => {
  const processor = new MessageProcessor([basicCatalog]);
  let surface = null;
  processor.onSurfaceCreated((created) => { surface = created; });
  processor.processMessages(messages);
  const element = document.createElement("a2ui-surface");
  element.surface = surface;
  document.getElementById("host").replaceChildren(element);
  window.a2uiProcessor = processor;
};

// A change: only the updateDataModel message is applied to the surface already drawn.
window.updateA2ui = (messages) => window.a2uiProcessor.processMessages(messages);
