// The official A2A JS SDK against our server (tests/test_js_sdk.py): resolve the card at BASE_URL over https
// (the test CA comes in NODE_EXTRA_CA_CERTS), dial the card's GRPC interface url as served over TLS trusting
// CA_FILE, send TEXT, get the returned task. One JSON line on stdout; a failed step is {"error": ...} in it.
//
//   node dial_card.mjs BASE_URL CA_FILE TEXT
import { readFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { AgentCardResolver, ClientFactory } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";

const CALL_MS = 20_000;
const [baseUrl, caFile, text] = process.argv.slice(2);
const result = {};

function failure(error) {
  const cause = error?.cause;
  return {
    name: error?.name,
    message: String(error?.message ?? error),
    code: error?.code ?? cause?.code,
    cause: cause ? String(cause.details ?? cause.message ?? cause) : undefined,
  };
}

async function main() {
  const card = await AgentCardResolver.default.resolve(baseUrl);
  result.grpcUrls = (card.supportedInterfaces ?? [])
    .filter((i) => i.protocolBinding?.toUpperCase() === "GRPC")
    .map((i) => i.url);
  const factory = new ClientFactory({
    transports: [new GrpcTransportFactory({ grpcChannelCredentials: grpc.credentials.createSsl(readFileSync(caFile)) })],
    preferredTransports: ["GRPC"],
  });
  const client = await factory.createFromAgentCard(card); // dials the GRPC interface's url, as the card says it
  try {
    // the SDK's types are its generated protobuf messages: every field given, as its encoder wants
    const part = { content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" };
    const message = {
      messageId: randomUUID(), contextId: "", taskId: "", role: 1 /* ROLE_USER */, parts: [part],
      metadata: undefined, extensions: [], referenceTaskIds: [],
    };
    const request = { tenant: "", message, configuration: undefined, metadata: undefined };
    result.send = await client.sendMessage(request, { signal: AbortSignal.timeout(CALL_MS) });
    const id = result.send.id;
    result.get = await client.getTask({ tenant: "", id }, { signal: AbortSignal.timeout(CALL_MS) });
  } finally {
    client.transport?.grpcClient?.close?.();
  }
}

try {
  await main();
} catch (error) {
  result.error = failure(error);
}
process.stdout.write(JSON.stringify(result) + "\n");
process.exit(0);
