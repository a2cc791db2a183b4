#!/usr/bin/env node
// What a rendered chart's ServiceMonitors would scrape, resolved the way prometheus-operator
// does: each endpoint's port names a port of the Services its selector (matchLabels,
// matchExpressions In/NotIn/Exists/DoesNotExist) and namespaceSelector pick; that Service's
// targetPort names a container port of the pods its selector picks (pod templates of
// Deployments, DaemonSets, StatefulSets). Prints one line per target,
//   ServiceMonitor/NAME PORT -> Service/NAME -> WORKLOAD container CONTAINER port NUMBER
// and one line per endpoint that reaches nothing ("PORT: no target").
//   node test/chart/scrape_targets.mjs RENDERED.yaml
// Exit 0 always when the input parses (the caller compares the lines); 2 on bad input.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "../../hack/chart/node_modules/"));
const { parseAllDocuments } = require("yaml");

const file = process.argv[2];
if (!file) {
  process.stderr.write("usage: node scrape_targets.mjs RENDERED.yaml\n");
  process.exit(2);
}
const objs = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter((o) => o && o.kind);

function matches(sel, labels) {
  labels = labels || {};
  for (const [k, v] of Object.entries(sel.matchLabels || {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions || []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    if (e.operator === "In" && !(has && e.values.includes(labels[e.key]))) return false;
    if (e.operator === "NotIn" && has && e.values.includes(labels[e.key])) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return true;
}

const workloads = objs.filter((o) => ["Deployment", "DaemonSet", "StatefulSet"].includes(o.kind));
for (const sm of objs.filter((o) => o.kind === "ServiceMonitor")) {
  const ns = sm.spec.namespaceSelector || {};
  const inNs = (o) => (ns.any ? true : (ns.matchNames || [sm.metadata.namespace]).includes(o.metadata.namespace));
  const services = objs.filter((o) => o.kind === "Service" && inNs(o) && matches(sm.spec.selector || {}, o.metadata.labels));
  for (const ep of sm.spec.endpoints || []) {
    let n = 0;
    for (const svc of services) {
      for (const sp of svc.spec.ports || []) {
        if (sp.name !== ep.port) continue;
        for (const w of workloads) {
          const tpl = w.spec.template;
          if (w.metadata.namespace !== svc.metadata.namespace || !matches({ matchLabels: svc.spec.selector }, tpl.metadata.labels)) continue;
          for (const c of tpl.spec.containers || []) {
            for (const cp of c.ports || []) {
              const hit = typeof sp.targetPort === "string" ? cp.name === sp.targetPort : cp.containerPort === (sp.targetPort ?? sp.port);
              if (!hit) continue;
              n++;
              console.log(`ServiceMonitor/${sm.metadata.name} ${ep.port} -> Service/${svc.metadata.name} -> ${w.kind}/${w.metadata.name} container ${c.name} port ${cp.containerPort}`);
            }
          }
        }
      }
    }
    if (n === 0) console.log(`ServiceMonitor/${sm.metadata.name} ${ep.port}: no target`);
  }
}
