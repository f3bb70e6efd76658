// The official A2A JS SDK over one of our HTTP bindings (tests/test_js_sdk_http.py): resolve the card at
// BASE_URL, make a client that may use BINDING only (JSONRPC or HTTP+JSON), send TEXT, stream TEXT, and get the
// task the send returned. One JSON line on stdout; a failed step is {"error": ...} in it.
//
//   node http_bindings.mjs BASE_URL BINDING TEXT
import { randomUUID } from "node:crypto";
import { AgentCardResolver, ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";

const CALL_MS = 20_000;
const [baseUrl, binding, text] = process.argv.slice(2);
const result = {};

function failure(error) {
  return { name: error?.name, message: String(error?.message ?? error), code: error?.code };
}

function request() {
  // the SDK's types are its generated protobuf messages: every field given, as its encoder wants
  const part = { content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" };
  const message = {
    messageId: randomUUID(), contextId: "", taskId: "", role: 1 /* ROLE_USER */, parts: [part],
    metadata: undefined, extensions: [], referenceTaskIds: [],
  };
  return { tenant: "", message, configuration: undefined, metadata: undefined };
}

async function main() {
  const card = await AgentCardResolver.default.resolve(baseUrl);
  result.interfaces = (card.supportedInterfaces ?? []).map((i) => [i.protocolBinding, i.url]);
  const transport = binding === "JSONRPC" ? new JsonRpcTransportFactory() : new RestTransportFactory();
  const factory = new ClientFactory({ transports: [transport], preferredTransports: [binding] });
  const client = await factory.createFromAgentCard(card);
  result.send = await client.sendMessage(request(), { signal: AbortSignal.timeout(CALL_MS) });
  result.stream = [];
  for await (const event of client.sendMessageStream(request(), { signal: AbortSignal.timeout(CALL_MS) })) {
    result.stream.push(event);
  }
  result.get = await client.getTask({ tenant: "", id: result.send.id }, { signal: AbortSignal.timeout(CALL_MS) });
}

try {
  await main();
} catch (error) {
  result.error = failure(error);
}
process.stdout.write(JSON.stringify(result) + "\n");
process.exit(0);
