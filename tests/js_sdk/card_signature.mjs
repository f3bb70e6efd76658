// The official A2A JS SDK's card signing against ours (tests/test_card_signing_js.py). One JSON line on stdout.
//
//   node card_signature.mjs verify BASE_URL
//     the card as the SDK's resolver reads it, checked by verifyAgentCardSignature with the key its kid names in
//     the JWKS its jku names: {"verified": true, "name": ...} or {"error": ...}
//   node card_signature.mjs sign CARD_FILE PRIVATE_JWK_FILE
//     the ProtoJSON card in CARD_FILE signed by generateAgentCardSignature (alg and kid from the JWK, typ JOSE):
//     {"card": ...}
import { readFileSync } from "node:fs";
import { generateAgentCardSignature, verifyAgentCardSignature } from "@a2a-js/sdk";
import { AgentCardResolver } from "@a2a-js/sdk/client";

async function keyFromJku(kid, jku) {
  const jwks = await (await fetch(jku)).json();
  const key = jwks.keys.find((candidate) => candidate.kid === kid);
  if (!key) throw new Error(`no key ${kid} at ${jku}`);
  return key;
}

async function verify(baseUrl) {
  const card = await AgentCardResolver.default.resolve(baseUrl);
  try {
    await verifyAgentCardSignature(keyFromJku)(card);
    return { verified: true, name: card.name };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}

async function sign(cardFile, jwkFile) {
  const card = JSON.parse(readFileSync(cardFile, "utf8"));
  const jwk = JSON.parse(readFileSync(jwkFile, "utf8"));
  const signer = generateAgentCardSignature(jwk, { alg: jwk.alg, kid: jwk.kid, typ: "JOSE" });
  return { card: await signer(card) };
}

const [command, ...args] = process.argv.slice(2);
const result = command === "verify" ? await verify(...args) : await sign(...args);
console.log(JSON.stringify(result));
