#!/usr/bin/env node
// Checks rendered chart output (hack/chart/render, `helm template`) object by object and prints
// one line per problem, naming the object (Kind/name, its "# Source:" file) and the field:
//   - every document parses as YAML and is a mapping with apiVersion, kind and metadata.name;
//   - it validates against the Kubernetes OpenAPI schema of its kind (npm kubernetes-models;
//     monitoring.coreos.com from @kubernetes-models/prometheus-operator); a kind neither package
//     has is skipped with a note;
//   - metadata.namespace is set on namespaced kinds and absent on cluster-scoped ones;
//   - in every pod template: each volumeMount names a declared volume (or volumeClaimTemplate), each configMap volume
//     names a rendered ConfigMap, serviceAccountName names a rendered ServiceAccount, each port
//     a probe uses (httpGet, tcpSocket, grpc; by number or name) is declared by that container;
//   - the dfdaemon socket dir (the volume named socket-dir, or any volume mounted at the socket
//     dir) is a hostPath, never emptyDir (csi and persistentVolumeClaim volumes are the CSI
//     driver's publishes and allowed), and csi-plugin's --socket-dir is mounted from the same
//     host path as dfdaemon's socket dir;
//   - CSIDriver metadata.name and every StorageClass provisioner equal csi-plugin's
//     --driver-name (else CSI_DRIVER_NAME, else the default its --help shows);
//   - containers that run our binaries (dfdaemon, dfcache, csi-plugin, scheduler: command, else
//     the container name; also `sh -c` scripts) use only flags that the built binary's --help
//     lists (asked at check time);
//   - the ConfigMap file that dfdaemon's and the scheduler's --config points at is accepted by
//     the real binary (`--config F --print-config` exits 0);
//   - every TLS file the effective configuration names (a caCert, cert or key key) is mounted in
//     that container: from a Secret volume (a rendered Secret that has the key, or the
//     secretName of a rendered cert-manager Certificate, which holds ca.crt, tls.crt, tls.key),
//     a ConfigMap volume with the key, or a hostPath, csi or projected volume (not checkable).
//
//   node hack/chart/validate.mjs --build BUILD_DIR [--examples] FILE|-...
// --examples: the files are plain manifests a user applies with `kubectl apply -n NS` (the
// chart's examples/): no namespace is required, and the ConfigMaps and ServiceAccounts they
// name need not be among them.
// Exit 0: no problem; 1: problems (listed on stdout); 2: bad command line or unreadable input.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, posix } from "node:path";
import { parseAllDocuments } from "yaml";

const OUR_BINARIES = {
  dfdaemon: "daemon/dfdaemon",
  dfcache: "daemon/cmd/dfcache/dfcache",
  "csi-plugin": "csi/csi-plugin",
  scheduler: "scheduler/scheduler",
};
const CLUSTER_SCOPED = new Set([
  "APIService", "CertificateSigningRequest", "ClusterRole", "ClusterRoleBinding",
  "ComponentStatus", "CSIDriver", "CSINode", "CustomResourceDefinition", "FlowSchema",
  "IngressClass", "MutatingWebhookConfiguration", "Namespace", "Node", "PersistentVolume",
  "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass", "StorageClass",
  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
  "ValidatingWebhookConfiguration", "VolumeAttachment",
]);
const DEFAULT_SOCKET_PATH = "/var/run/dragonfly/dfdaemon.sock";

function usage(msg) {
  process.stderr.write(`validate: ${msg}\nusage: node hack/chart/validate.mjs --build BUILD_DIR [--examples] FILE|-...\n`);
  process.exit(2);
}

// ---- command line ----
let buildDir = null;
let examples = false;
const inputs = [];
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--build") {
      if (i + 1 >= argv.length) usage("--build needs a directory");
      buildDir = argv[++i];
    } else if (a.startsWith("--build=")) {
      buildDir = a.slice("--build=".length);
    } else if (a === "--examples") {
      examples = true;
    } else if (a === "-h" || a === "--help") {
      process.stdout.write("usage: node hack/chart/validate.mjs --build BUILD_DIR [--examples] FILE|-...\n");
      process.exit(0);
    } else if (a.startsWith("-") && a !== "-") {
      usage(`unknown option ${a}`);
    } else {
      inputs.push(a);
    }
  }
  if (!buildDir) usage("--build BUILD_DIR is required (where dfdaemon, dfcache, csi-plugin, scheduler are built)");
  if (inputs.length === 0) usage("no input file");
  for (const [name, rel] of Object.entries(OUR_BINARIES)) {
    if (!existsSync(join(buildDir, rel))) usage(`--build ${buildDir}: ${rel} (${name}) not found`);
  }
}

const problems = [];
const notes = [];
function problem(obj, field, msg) {
  problems.push(`${obj ? obj.id : "input"}: ${field}: ${msg}`);
}

// ---- reading the documents ----
// Splits at "---" lines and keeps the last "# Source:" comment seen, so every object can be named
// by the template it came from.
const objects = [];
for (const file of inputs) {
  let text;
  try {
    text = readFileSync(file === "-" ? 0 : file, "utf8");
  } catch (e) {
    usage(`${file}: ${e.message}`);
  }
  let source = file;
  const chunks = text.split(/^---[ \t]*(?:#.*)?$/m);
  let index = 0;
  for (const chunk of chunks) {
    const m = chunk.match(/^# Source: (.+)$/m);
    if (m) source = m[1].trim();
    const docs = parseAllDocuments(chunk, { prettyErrors: false });
    const list = Array.isArray(docs) ? docs : [docs];
    for (const doc of list) {
      index++;
      const where = `${source} (document ${index} of ${file})`;
      if (doc.errors && doc.errors.length) {
        problems.push(`${where}: YAML: ${doc.errors[0].message.split("\n")[0]}`);
        continue;
      }
      const value = doc.toJS({ maxAliasCount: 100 });
      if (value === null || value === undefined) continue; // comments only
      if (typeof value !== "object" || Array.isArray(value)) {
        problems.push(`${where}: not a mapping (a Kubernetes object)`);
        continue;
      }
      const kind = typeof value.kind === "string" ? value.kind : "";
      const name = value.metadata && typeof value.metadata.name === "string" ? value.metadata.name : "";
      const obj = { value, kind, name, source, id: `${kind || "?"}/${name || "?"} (${source})` };
      if (!value.apiVersion) problem(obj, "apiVersion", "missing");
      if (!kind) problem(obj, "kind", "missing");
      if (!name) problem(obj, "metadata.name", "missing");
      objects.push(obj);
    }
  }
}

// ---- schemas ----
async function loadModel(apiVersion, kind) {
  const candidates = [];
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    candidates.push(`@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`);
  } else {
    candidates.push(`kubernetes-models/${apiVersion}/${kind}`);
  }
  for (const spec of candidates) {
    try {
      const mod = await import(spec);
      return mod[kind] || mod.default || null;
    } catch (e) {
      if (e.code !== "ERR_MODULE_NOT_FOUND" && e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw e;
    }
  }
  return null;
}

function schemaErrorText(e) {
  if (Array.isArray(e.errors) && e.errors.length) {
    return e.errors
      .map((x) => `${(x.instancePath || "/").replace(/^\//, "").replace(/\//g, ".") || "(object)"} ${x.message}` +
        (x.params && x.params.allowedValues ? ` (${x.params.allowedValues.join(", ")})` : ""))
      .join("; ");
  }
  return e.message;
}

for (const obj of objects) {
  const { apiVersion } = obj.value;
  if (!apiVersion || !obj.kind) continue;
  const Model = await loadModel(String(apiVersion), obj.kind);
  if (!Model) {
    notes.push(`${obj.id}: no schema for ${apiVersion} ${obj.kind} in kubernetes-models: schema not checked`);
    continue;
  }
  try {
    new Model(obj.value).validate();
  } catch (e) {
    problem(obj, "schema", schemaErrorText(e));
  }
}

// ---- namespaces ----
for (const obj of objects) {
  const ns = obj.value.metadata && obj.value.metadata.namespace;
  if (!obj.kind) continue;
  if (CLUSTER_SCOPED.has(obj.kind)) {
    if (ns !== undefined && ns !== null) problem(obj, "metadata.namespace", `set on cluster-scoped kind ${obj.kind}`);
  } else if (!examples && (typeof ns !== "string" || ns === "")) {
    problem(obj, "metadata.namespace", `missing on namespaced kind ${obj.kind}`);
  }
}

// ---- binaries: --help flags and --print-config ----
const helpCache = new Map();
// Flags of `binary [subcommand] --help`: Map name -> takes a value.
function binaryFlags(bin, sub) {
  const key = `${bin} ${sub || ""}`;
  if (helpCache.has(key)) return helpCache.get(key);
  const args = sub ? [sub, "--help"] : ["--help"];
  const r = spawnSync(join(buildDir, OUR_BINARIES[bin]), args, { encoding: "utf8", timeout: 20000 });
  let res = null;
  if (r.status === 0) {
    const flags = new Map();
    let driverDefault = null;
    // A metavar is upper case, e.g. N, DIR, IP:PORT, KEY=VALUE, or <name>.
    for (const line of (r.stdout + r.stderr).split("\n")) {
      const m = line.match(/^ {2,}(?:(-[A-Za-z0-9]), +)?(--[a-z0-9][a-z0-9-]*)(?:[ =]([A-Z][A-Z0-9_:]*(?:=[A-Z]+)?|<[^>]+>)(?= |$))?/);
      if (!m) continue;
      const takes = Boolean(m[3]);
      if (m[1]) flags.set(m[1], takes);
      flags.set(m[2], takes);
      if (m[2] === "--driver-name") {
        const d = line.match(/\[([^\]]+)\]/);
        if (d) driverDefault = d[1];
      }
    }
    res = { flags, driverDefault };
  }
  helpCache.set(key, res);
  return res;
}

const podTemplates = []; // { obj, spec, path }
function podSpecOf(obj) {
  const v = obj.value;
  switch (obj.kind) {
    case "Pod":
      return [v.spec, "spec"];
    case "Deployment": case "DaemonSet": case "StatefulSet": case "ReplicaSet": case "Job": case "ReplicationController":
      return [v.spec && v.spec.template && v.spec.template.spec, "spec.template.spec"];
    case "CronJob":
      return [v.spec && v.spec.jobTemplate && v.spec.jobTemplate.spec && v.spec.jobTemplate.spec.template &&
        v.spec.jobTemplate.spec.template.spec, "spec.jobTemplate.spec.template.spec"];
    default:
      return [null, null];
  }
}
for (const obj of objects) {
  const [spec, path] = podSpecOf(obj);
  if (spec && typeof spec === "object") podTemplates.push({ obj, spec, path });
}

function allContainers(spec) {
  const out = [];
  for (const field of ["initContainers", "containers", "ephemeralContainers"]) {
    const list = Array.isArray(spec[field]) ? spec[field] : [];
    list.forEach((c, i) => {
      if (c && typeof c === "object") out.push({ c, path: `${field}[${c.name || i}]` });
    });
  }
  return out;
}

const SHELLS = new Set(["sh", "bash", "dash", "ash"]);
const WRAPPERS = new Set(["tini", "dumb-init", "tini-static", "catatonit"]);
let runsChecked = 0;
let configsChecked = 0;
let tlsFilesChecked = 0;
// Each run of one of our binaries inside a container: { bin, sub, argv, where }.
function invocations(c) {
  const cmd = Array.isArray(c.command) ? c.command.map(String) : [];
  const args = Array.isArray(c.args) ? c.args.map(String) : [];
  let full = cmd.length ? cmd.concat(args) : args;
  const out = [];
  // An init wrapper (tini -- BINARY ...) runs the program after its own options.
  if (full.length && WRAPPERS.has(basename(full[0]))) {
    let i = 1;
    while (i < full.length && full[i].startsWith("-") && full[i] !== "--") i++;
    if (full[i] === "--") i++;
    full = full.slice(i);
  }
  const first = full.length && (cmd.length || OUR_BINARIES[basename(full[0])]) ? basename(full[0]) : null;
  if (first && SHELLS.has(first)) {
    const ci = full.indexOf("-c");
    if (ci >= 0 && ci + 1 < full.length) {
      // A shell script: every word that names one of our binaries starts a run, up to the next
      // shell operator. Quotes are stripped; $VAR and $(...) words are left as they are.
      const words = full[ci + 1].match(/"[^"]*"|'[^']*'|[^\s;|&]+|[;|&]+/g) || [];
      for (let i = 0; i < words.length; i++) {
        const w = words[i].replace(/^["']|["']$/g, "");
        if (OUR_BINARIES[basename(w)]) {
          const argv = [];
          let j = i + 1;
          for (; j < words.length && !/^[;|&]+$/.test(words[j]); j++) argv.push(words[j].replace(/^["']|["']$/g, ""));
          out.push({ bin: basename(w), argv, where: "command (shell script)" });
          i = j;
        }
      }
    }
    return out;
  }
  if (first && OUR_BINARIES[first]) {
    out.push({ bin: first, argv: full.slice(1), where: args.length ? "args" : "command" });
  } else if (!cmd.length && !first && OUR_BINARIES[c.name]) {
    out.push({ bin: c.name, argv: args, where: "args" });
  }
  return out;
}

// Checks argv against the binary's --help; returns Map flag -> value (last one wins).
function checkFlags(obj, path, run) {
  let sub = null;
  let argv = run.argv;
  if (run.bin === "dfcache") {
    if (argv.length === 0 || argv[0].startsWith("-")) {
      problem(obj, `${path}.${run.where}`, "dfcache without a command (import, export, stat, ls, rm)");
      return new Map();
    }
    sub = argv[0];
    argv = argv.slice(1);
  }
  const help = binaryFlags(run.bin, sub);
  runsChecked++;
  if (!help) {
    problem(obj, `${path}.${run.where}`, `${run.bin}${sub ? " " + sub : ""} --help failed: not a command it has`);
    return new Map();
  }
  const values = new Map();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") break;
    if (!a.startsWith("-") || a === "-") continue;
    const eq = a.indexOf("=");
    const name = a.startsWith("--") && eq > 0 ? a.slice(0, eq) : a;
    if (!help.flags.has(name)) {
      problem(obj, `${path}.${run.where}`, `${run.bin}${sub ? " " + sub : ""} has no flag ${name} (not in its --help)`);
      continue;
    }
    if (help.flags.get(name)) {
      if (eq > 0 && name.startsWith("--")) {
        values.set(name, a.slice(eq + 1));
      } else if (i + 1 < argv.length) {
        values.set(name, argv[++i]);
      } else {
        problem(obj, `${path}.${run.where}`, `${run.bin} ${name} needs a value`);
      }
    } else {
      if (eq > 0 && name.startsWith("--")) problem(obj, `${path}.${run.where}`, `${run.bin} ${name} takes no value`);
      values.set(name, "");
    }
  }
  return values;
}

function envValue(c, name) {
  const env = Array.isArray(c.env) ? c.env : [];
  const e = env.find((x) => x && x.name === name);
  return e && typeof e.value === "string" ? e.value : undefined;
}

// Rendered objects by kind, found by namespace and name; an object without a namespace (one
// reported above) is matched by name alone, as it would land in the release namespace.
function findObject(kind, ns, name) {
  return objects.find((o) => o.kind === kind && o.name === name &&
    (!o.value.metadata.namespace || !ns || o.value.metadata.namespace === ns));
}

// The file a container sees at path p, when it comes from a ConfigMap volume: { cm, key } or a
// reason it cannot be found.
function configFileAt(pt, c, p) {
  const mounts = Array.isArray(c.volumeMounts) ? c.volumeMounts : [];
  let best = null;
  for (const m of mounts) {
    if (!m || typeof m.mountPath !== "string") continue;
    const mp = m.mountPath.replace(/\/+$/, "");
    if (p === mp || p.startsWith(mp + "/")) {
      if (!best || mp.length > best.mp.length) best = { m, mp };
    }
  }
  if (!best) return { reason: `no volumeMount contains ${p}` };
  const vols = Array.isArray(pt.spec.volumes) ? pt.spec.volumes : [];
  const vol = vols.find((v) => v && v.name === best.m.name);
  if (!vol || !vol.configMap) return { reason: `${p} is not on a configMap volume (volume ${best.m.name})` };
  let rel = best.m.subPath ? best.m.subPath : posix.relative(best.mp, p);
  if (best.m.subPath && p !== best.mp) rel = posix.join(best.m.subPath, posix.relative(best.mp, p));
  let key = rel;
  if (Array.isArray(vol.configMap.items) && vol.configMap.items.length) {
    const item = vol.configMap.items.find((it) => it && it.path === rel);
    if (!item) return { reason: `configMap volume ${vol.name} has no item with path ${rel}` };
    key = item.key;
  }
  const cm = findObject("ConfigMap", pt.obj.value.metadata.namespace, vol.configMap.name);
  if (!cm) return { reason: `ConfigMap ${vol.configMap.name} is not rendered` };
  const data = cm.value.data || {};
  if (typeof data[key] !== "string") return { reason: `ConfigMap ${vol.configMap.name} has no key ${key}` };
  return { cm, key, text: data[key] };
}

const tmp = mkdtempSync(join(process.env.TMPDIR || tmpdir(), "chart-validate."));
process.on("exit", () => rmSync(tmp, { recursive: true, force: true }));
let tmpSeq = 0;
// Runs `bin --config F --print-config`; returns the printed YAML text or null (problem logged).
function printConfig(obj, field, bin, text) {
  const f = join(tmp, `config-${++tmpSeq}.yaml`);
  writeFileSync(f, text);
  configsChecked++;
  const r = spawnSync(join(buildDir, OUR_BINARIES[bin]), ["--config", f, "--print-config"], {
    encoding: "utf8", timeout: 20000,
  });
  if (r.status !== 0) {
    const err = (r.stderr || r.stdout || "").trim().split("\n")[0].split(f).join(field);
    problem(obj, field, `${bin} --config F --print-config rejects it: ${err || `exit ${r.status}`}`);
    return null;
  }
  return r.stdout;
}

function socketPathFromConfig(yamlText) {
  // download.server.socketPath in --print-config output.
  try {
    const docs = parseAllDocuments(yamlText);
    const v = (Array.isArray(docs) ? docs[0] : docs).toJS();
    return v && v.download && v.download.server && v.download.server.socketPath;
  } catch {
    return undefined;
  }
}

// The TLS file settings of a --print-config output: [{ key: "upload.server.caCert", path }].
const TLS_FILE_KEYS = new Set(["caCert", "cert", "key"]);
function tlsFilesFromConfig(yamlText) {
  let v;
  try {
    const docs = parseAllDocuments(yamlText);
    v = (Array.isArray(docs) ? docs[0] : docs).toJS();
  } catch {
    return [];
  }
  const out = [];
  const walk = (o, prefix) => {
    if (!o || typeof o !== "object" || Array.isArray(o)) return;
    for (const [k, x] of Object.entries(o)) {
      const key = prefix ? `${prefix}.${k}` : k;
      if (TLS_FILE_KEYS.has(k) && typeof x === "string" && x !== "") out.push({ key, path: x });
      else walk(x, key);
    }
  };
  walk(v, "");
  return out;
}

// Why the file at path p is not where container c of pod template pt can read it, or null.
const CERT_MANAGER_KEYS = new Set(["ca.crt", "tls.crt", "tls.key"]);
function tlsFileProblem(pt, c, p) {
  const mounts = Array.isArray(c.volumeMounts) ? c.volumeMounts : [];
  let best = null;
  for (const m of mounts) {
    if (!m || typeof m.mountPath !== "string") continue;
    const mp = m.mountPath.replace(/\/+$/, "");
    if (p.startsWith(mp + "/") && (!best || mp.length > best.mp.length)) best = { m, mp };
  }
  if (!best) return `no volumeMount contains ${p}`;
  const vol = (Array.isArray(pt.spec.volumes) ? pt.spec.volumes : []).find((v) => v && v.name === best.m.name);
  if (!vol) return null; // an undeclared volume is reported above
  if (vol.hostPath || vol.csi || vol.projected) return null;
  const src = vol.secret || vol.configMap;
  if (!src) return `${p} is on volume ${vol.name} (${Object.keys(vol).filter((k) => k !== "name").join(",")}), not a Secret, ConfigMap, hostPath, csi or projected volume`;
  let rel = posix.relative(best.mp, p);
  if (best.m.subPath) rel = posix.join(best.m.subPath, rel);
  let key = rel;
  if (Array.isArray(src.items) && src.items.length) {
    const item = src.items.find((it) => it && it.path === rel);
    if (!item) return `volume ${vol.name} has no item with path ${rel}`;
    key = item.key;
  }
  const ns = pt.obj.value.metadata.namespace;
  if (vol.configMap) {
    const cm = findObject("ConfigMap", ns, src.name);
    if (!cm) return src.optional ? null : `ConfigMap ${src.name} is not rendered`;
    return cm.value.data && typeof cm.value.data[key] === "string" ? null : `ConfigMap ${src.name} has no key ${key}`;
  }
  const secret = findObject("Secret", ns, src.secretName);
  if (secret) {
    const data = Object.assign({}, secret.value.data || {}, secret.value.stringData || {});
    return key in data ? null : `Secret ${src.secretName} has no key ${key}`;
  }
  const cert = objects.find((o) => o.kind === "Certificate" && o.value.spec && o.value.spec.secretName === src.secretName &&
    (!o.value.metadata.namespace || !ns || o.value.metadata.namespace === ns));
  if (cert) return CERT_MANAGER_KEYS.has(key) ? null : `Certificate ${cert.name}'s Secret ${src.secretName} has no key ${key} (only ca.crt, tls.crt, tls.key)`;
  if (examples) return null;
  return `Secret ${src.secretName} is neither rendered nor the secretName of a rendered Certificate`;
}

function portDeclared(c, port) {
  const ports = Array.isArray(c.ports) ? c.ports : [];
  if (typeof port === "number") return ports.some((p) => p && p.containerPort === port);
  if (typeof port === "string" && /^[0-9]+$/.test(port)) return ports.some((p) => p && p.containerPort === Number(port));
  return ports.some((p) => p && p.name === port);
}

let driverName = null; // { name, obj }
const socketDirHostPaths = []; // { hostPath, obj }
const pluginSocketDirs = []; // { dir, hostPath, obj, field }

for (const pt of podTemplates) {
  const { obj, spec, path } = pt;
  const vols = Array.isArray(spec.volumes) ? spec.volumes : [];
  const volByName = new Map(vols.filter((v) => v && v.name).map((v) => [v.name, v]));
  // A StatefulSet's volumeClaimTemplates are volumes of its pods as well.
  if (obj.kind === "StatefulSet" && Array.isArray(obj.value.spec.volumeClaimTemplates)) {
    for (const t of obj.value.spec.volumeClaimTemplates) {
      if (t && t.metadata && t.metadata.name) volByName.set(t.metadata.name, { name: t.metadata.name, persistentVolumeClaim: {} });
    }
  }
  const ns = obj.value.metadata.namespace;

  if (!examples && spec.serviceAccountName && spec.serviceAccountName !== "default" && !findObject("ServiceAccount", ns, spec.serviceAccountName)) {
    problem(obj, `${path}.serviceAccountName`, `ServiceAccount ${spec.serviceAccountName} is not rendered`);
  }
  vols.forEach((v, i) => {
    if (!examples && v && v.configMap && v.configMap.name && !v.configMap.optional && !findObject("ConfigMap", ns, v.configMap.name)) {
      problem(obj, `${path}.volumes[${v.name || i}].configMap.name`, `ConfigMap ${v.configMap.name} is not rendered`);
    }
  });

  // The socket dir of the dfdaemon in this pod (if any), from its flags or config file.
  const socketDirs = new Set();
  for (const { c, path: cpath } of allContainers(spec)) {
    const full = `${path}.${cpath}`;
    (Array.isArray(c.volumeMounts) ? c.volumeMounts : []).forEach((m, i) => {
      if (!m || !volByName.has(m.name)) {
        problem(obj, `${full}.volumeMounts[${(m && m.name) || i}].name`, `no volume named ${m && m.name} in the pod`);
      }
    });
    for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) {
      const p = c[probe];
      if (!p || typeof p !== "object") continue;
      for (const kind of ["httpGet", "tcpSocket", "grpc"]) {
        if (p[kind] && p[kind].port !== undefined && !portDeclared(c, p[kind].port)) {
          problem(obj, `${full}.${probe}.${kind}.port`, `port ${p[kind].port} is not declared in the container's ports`);
        }
      }
    }
    for (const run of invocations(c)) {
      const values = checkFlags(obj, full, run);
      if (run.bin === "dfdaemon" || run.bin === "scheduler") {
        const cfg = values.get("--config") ?? values.get("-c");
        if (cfg === undefined) {
          problem(obj, `${full}.${run.where}`, `${run.bin} runs without --config (its config must come from a ConfigMap)`);
        } else {
          const f = configFileAt(pt, c, cfg);
          if (!f.cm) {
            problem(obj, `${full}.${run.where}`, `${run.bin} --config ${cfg}: ${f.reason}`);
          } else {
            const printed = printConfig(f.cm, `data.${f.key}`, run.bin, f.text);
            if (printed !== null) {
              for (const t of tlsFilesFromConfig(printed)) {
                tlsFilesChecked++;
                const why = tlsFileProblem(pt, c, t.path);
                if (why) problem(obj, `${full}.volumeMounts`, `${run.bin} ${t.key} ${t.path}: ${why}`);
              }
            }
            if (printed !== null && run.bin === "dfdaemon") {
              const sp = values.get("--socket-path") ?? envValue(c, "DFDAEMON_SOCKET_PATH") ?? socketPathFromConfig(printed);
              if (sp) socketDirs.add(posix.dirname(sp));
            }
          }
        }
        if (run.bin === "dfdaemon" && cfg === undefined) {
          socketDirs.add(posix.dirname(values.get("--socket-path") ?? envValue(c, "DFDAEMON_SOCKET_PATH") ?? DEFAULT_SOCKET_PATH));
        }
      }
      if (run.bin === "csi-plugin") {
        const help = binaryFlags("csi-plugin", null);
        const dn = values.get("--driver-name") ?? envValue(c, "CSI_DRIVER_NAME") ?? (help && help.driverDefault);
        if (dn) {
          if (driverName && driverName.name !== dn) {
            problem(obj, `${full}.${run.where}`, `--driver-name ${dn} differs from ${driverName.name} in ${driverName.obj.id}`);
          } else if (!driverName) {
            driverName = { name: dn, obj };
          }
        }
        const sd = values.get("--socket-dir") ?? envValue(c, "CSI_SOCKET_DIR") ?? "/var/run/dragonfly";
        pluginSocketDirs.push({ dir: sd.replace(/\/+$/, ""), c, pt, obj, field: `${full}.${run.where}` });
      }
    }
  }

  // The socket dir volumes: named socket-dir, or mounted at a dfdaemon socket dir of this pod.
  const socketVols = new Map();
  for (const v of vols) if (v && v.name === "socket-dir") socketVols.set(v.name, v);
  for (const { c } of allContainers(spec)) {
    for (const m of Array.isArray(c.volumeMounts) ? c.volumeMounts : []) {
      if (m && typeof m.mountPath === "string" && socketDirs.has(m.mountPath.replace(/\/+$/, "")) && volByName.has(m.name)) {
        socketVols.set(m.name, volByName.get(m.name));
      }
    }
  }
  for (const dir of socketDirs) {
    const mounted = allContainers(spec).some(({ c }) => (Array.isArray(c.volumeMounts) ? c.volumeMounts : [])
      .some((m) => m && typeof m.mountPath === "string" && m.mountPath.replace(/\/+$/, "") === dir));
    if (!mounted) problem(obj, `${path}.containers`, `dfdaemon's socket dir ${dir} is not a volumeMount (it must be a shared hostPath)`);
  }
  for (const [name, v] of socketVols) {
    const field = `${path}.volumes[${name}]`;
    if (v.hostPath) {
      socketDirHostPaths.push({ hostPath: String(v.hostPath.path || "").replace(/\/+$/, ""), obj });
    } else if (!v.csi && !v.persistentVolumeClaim) {
      const type = Object.keys(v).filter((k) => k !== "name").join(",") || "no source";
      problem(obj, field, `the dfdaemon socket dir volume is ${type}, must be hostPath (never emptyDir)`);
    }
  }
}

// csi-plugin publishes --socket-dir: it must be the host dir dfdaemon's socket lives in.
for (const ps of pluginSocketDirs) {
  const f = (Array.isArray(ps.c.volumeMounts) ? ps.c.volumeMounts : [])
    .find((m) => m && typeof m.mountPath === "string" && m.mountPath.replace(/\/+$/, "") === ps.dir);
  if (!f) {
    problem(ps.obj, ps.field, `csi-plugin --socket-dir ${ps.dir} is not a volumeMount of the container`);
    continue;
  }
  const v = (ps.pt.spec.volumes || []).find((x) => x && x.name === f.name);
  if (!v || !v.hostPath) continue; // reported above (socket-dir must be hostPath) or not a volume
  const hp = String(v.hostPath.path || "").replace(/\/+$/, "");
  if (socketDirHostPaths.length && !socketDirHostPaths.some((s) => s.hostPath === hp)) {
    problem(ps.obj, ps.field, `csi-plugin --socket-dir ${ps.dir} is host path ${hp}, dfdaemon's socket dir is host path ${socketDirHostPaths.map((s) => s.hostPath).join(", ")}`);
  }
}

// CSIDriver and StorageClass names against csi-plugin's driver name.
for (const obj of objects) {
  if (obj.kind === "CSIDriver") {
    if (!driverName) problem(obj, "metadata.name", "no csi-plugin container renders a driver name to compare with");
    else if (obj.name !== driverName.name) problem(obj, "metadata.name", `${obj.name} is not csi-plugin's --driver-name ${driverName.name}`);
  }
  if (obj.kind === "StorageClass") {
    const prov = obj.value.provisioner;
    if (!driverName) problem(obj, "provisioner", "no csi-plugin container renders a driver name to compare with");
    else if (prov !== driverName.name) problem(obj, "provisioner", `${prov} is not csi-plugin's --driver-name ${driverName.name}`);
  }
}

for (const n of notes) process.stderr.write(`validate: note: ${n}\n`);
if (problems.length) {
  for (const p of problems) process.stdout.write(`${p}\n`);
  process.stderr.write(`validate: ${problems.length} problem(s) in ${objects.length} objects\n`);
  process.exit(1);
}
process.stdout.write(`validate: ${objects.length} objects ok (${runsChecked} runs of our binaries checked against their --help, ${configsChecked} config files through --print-config, ${tlsFilesChecked} TLS files mounted)\n`);
