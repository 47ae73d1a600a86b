// Checks a Kubernetes manifest (several YAML documents) against the API's schemas: each document's
// apiVersion and kind must be known, and the object must validate (unknown fields, wrong types and
// missing required fields are errors). Usage: node k8s_check.mjs FILE. Exit 0 when every document is
// valid, 1 with the errors otherwise. Run by deploy_check.sh.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const file = process.argv[2];
const docs = parseAllDocuments(readFileSync(file, "utf8"));
let failed = 0;
let checked = 0;
for (const doc of docs) {
  if (doc.errors.length) {
    console.error(`${file}: YAML error: ${doc.errors.map((e) => e.message).join("; ")}`);
    failed++;
    continue;
  }
  const obj = doc.toJS();
  if (obj === null || obj === undefined) continue;
  const { apiVersion, kind } = obj;
  const [group, version] = apiVersion && apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const path = group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
  let Model;
  try {
    Model = (await import(path))[kind];
  } catch (e) {
    console.error(`${file}: unknown apiVersion/kind ${apiVersion}/${kind} (${e.message})`);
    failed++;
    continue;
  }
  try {
    new Model(obj).validate();
    checked++;
    console.log(`${file}: ${apiVersion} ${kind} ${obj.metadata?.name}: valid`);
  } catch (e) {
    console.error(`${file}: ${apiVersion} ${kind} ${obj.metadata?.name}: ${e.message}`);
    failed++;
  }
}
if (checked === 0 && failed === 0) {
  console.error(`${file}: no documents`);
  failed++;
}
console.log(`${checked} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
