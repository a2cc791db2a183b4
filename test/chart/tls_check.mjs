#!/usr/bin/env node
// Checks one rendering of charts/dragonfly-csi for test/chart/tls_test.sh: the TLS objects, the
// daemons' TLS keys, the NetworkPolicies and Sentinel auth, as the case expects them.
//   node test/chart/tls_check.mjs RENDERED.yaml CASE OUTDIR
// Prints "ok   ..." and "FAIL: ..." lines; exit 1 when any check failed. The generated PEM files
// of the Secrets are written to OUTDIR/<secret>.<key> (for openssl in tls_test.sh).
// CASE: dump (only writes the files, with the Redis Secret's), generated, cert-manager, issuer-ref, tls-off, redis-tls-off, host-path, server-auth, sentinel-auth,
// sentinel-no-auth, netpol-cidrs, netpol-off.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

// The YAML parser hack/chart installs (npm ci in hack/chart).
const { parseAllDocuments } = createRequire(new URL("../../hack/chart/package.json", import.meta.url))("yaml");

const [file, kase, outDir] = process.argv.slice(2);
const objs = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
let failed = 0;
const ok = (msg) => console.log(`ok   ${kase}: ${msg}`);
const fail = (msg) => {
  failed++;
  console.log(`FAIL: ${kase}: ${msg}`);
};
const check = (cond, msg) => (cond ? ok(msg) : fail(msg));
const find = (kind, name) => objs.find((o) => o.kind === kind && o.metadata.name === name);
const all = (kind) => objs.filter((o) => o.kind === kind);

const P = "dfc-dragonfly-csi";
const NS = "dragonfly-system";
const schedFQDN = `${P}-scheduler-headless.${NS}.svc.cluster.local`;
const FILES = { caCert: "/etc/dragonfly-tls/ca.crt", cert: "/etc/dragonfly-tls/tls.crt", key: "/etc/dragonfly-tls/tls.key" };
const TLS_SECRETS = [`${P}-ca`, `${P}-scheduler-tls`, `${P}-node-tls`, `${P}-redis-tls`];

const cmData = (name, key) => {
  const cm = find("ConfigMap", name);
  return cm && cm.data ? cm.data[key] : undefined;
};
const yamlOf = (text) => (text === undefined ? {} : parseAllDocuments(text)[0].toJS());
const daemonCfg = yamlOf(cmData(`${P}-dfdaemon`, "dfdaemon.yaml"));
const schedCfg = yamlOf(cmData(`${P}-scheduler`, "scheduler.yaml"));
const ds = find("DaemonSet", `${P}-node`);
const dep = find("Deployment", `${P}-scheduler`);
const podVolume = (w, name) => w && (w.spec.template.spec.volumes || []).find((v) => v.name === name);
const mountOf = (w, container, name) => {
  const c = w && w.spec.template.spec.containers.find((x) => x.name === container);
  return c && (c.volumeMounts || []).find((m) => m.name === name);
};
const envOf = (w, container, name) => {
  const c = w && w.spec.template.spec.containers.find((x) => x.name === container);
  return c && (c.env || []).find((e) => e.name === name);
};
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const sideFiles = (o) => o && { caCert: o.caCert, cert: o.cert, key: o.key };
// The server name the clients dialling a node verify: dfc-node with the shared node certificate.
function nodeServerName(shared) {
  const want = shared ? "dfc-node" : undefined;
  check(daemonCfg.upload.client.serverName === want && schedCfg.peer.tls.serverName === want &&
    daemonCfg.upload.server.serverName === undefined && schedCfg.server.tls.serverName === undefined,
    `dfdaemon upload.client.serverName and scheduler peer.tls.serverName are ${want || "unset"}`);
}
// Every TLS key of both daemons names the files of the tls volume, under the expected policy.
function tlsConfigured(policy) {
  check(daemonCfg.security && daemonCfg.security.tlsPolicy === policy, `dfdaemon security.tlsPolicy is ${policy}`);
  check(same(sideFiles(daemonCfg.upload && daemonCfg.upload.server), FILES) &&
    same(sideFiles(daemonCfg.upload && daemonCfg.upload.client), FILES) &&
    same(sideFiles(daemonCfg.scheduler), FILES), "dfdaemon upload.server, upload.client and scheduler name /etc/dragonfly-tls/{ca.crt,tls.crt,tls.key}");
  check(daemonCfg.upload.server.port === 4000 && Array.isArray(daemonCfg.scheduler.addrs) &&
    daemonCfg.scheduler.addrs[0] === `${schedFQDN}:8002`, "dfdaemon keeps upload.server.port and scheduler.addrs beside the TLS keys");
  check(schedCfg.security && schedCfg.security.tlsPolicy === policy, `scheduler security.tlsPolicy is ${policy}`);
  check(same(sideFiles(schedCfg.server && schedCfg.server.tls), FILES) && same(sideFiles(schedCfg.peer && schedCfg.peer.tls), FILES),
    "scheduler server.tls and peer.tls name /etc/dragonfly-tls/{ca.crt,tls.crt,tls.key}");
  for (const [w, c] of [[ds, "dfdaemon"], [dep, "scheduler"]]) {
    const m = mountOf(w, c, "tls");
    check(m && m.mountPath === "/etc/dragonfly-tls" && m.readOnly === true, `${c} mounts volume tls at /etc/dragonfly-tls read-only`);
  }
  const sv = podVolume(dep, "tls");
  check(sv && sv.secret && sv.secret.secretName === `${P}-scheduler-tls`, `the scheduler's tls volume is Secret ${P}-scheduler-tls`);
  check(dep.spec.template.spec.securityContext.fsGroup === 65532 && sv && sv.secret.defaultMode === 0o440,
    "the scheduler (uid 65532) reads its key: fsGroup 65532, mode 0440");
}
function nodeVolumeIsSharedSecret() {
  nodeServerName(true);
  const v = podVolume(ds, "tls");
  check(v && v.secret && v.secret.secretName === `${P}-node-tls`, `the node pods' tls volume is the shared Secret ${P}-node-tls`);
}
function dumpSecrets() {
  mkdirSync(outDir, { recursive: true });
  for (const s of all("Secret")) {
    if (!TLS_SECRETS.includes(s.metadata.name) && s.metadata.name !== `${P}-redis`) continue;
    for (const [k, v] of Object.entries(s.data || {})) writeFileSync(`${outDir}/${s.metadata.name}.${k}`, Buffer.from(v, "base64"));
  }
}
function certificate(name) {
  return all("Certificate").find((c) => c.metadata.name === name);
}

switch (kase) {
  case "dump":
    dumpSecrets();
    break;
  case "generated":
  case "server-auth": {
    tlsConfigured(kase === "generated" ? "mutual" : "server-auth");
    check(find("Secret", `${P}-redis-tls`), "a Redis certificate by default (redis.tls.enabled)");
    for (const n of TLS_SECRETS.slice(0, 3)) {
      const s = find("Secret", n);
      check(s && s.type === "kubernetes.io/tls" && ["ca.crt", "tls.crt", "tls.key"].every((k) => s.data && s.data[k]),
        `Secret ${n} (kubernetes.io/tls) holds ca.crt, tls.crt, tls.key`);
    }
    check(all("Certificate").length === 0 && all("Issuer").length === 0, "no cert-manager objects without the cert-manager.io/v1 API");
    nodeVolumeIsSharedSecret();
    dumpSecrets();
    break;
  }
  case "cert-manager":
  case "issuer-ref": {
    tlsConfigured("mutual");
    check(TLS_SECRETS.every((n) => !find("Secret", n)), "no generated TLS Secret (cert-manager writes them)");
    const sc = certificate(`${P}-scheduler`);
    check(sc && sc.spec.secretName === `${P}-scheduler-tls` && sc.spec.dnsNames.includes(schedFQDN) &&
      sc.spec.dnsNames.includes(`${P}-scheduler.${NS}.svc`) && same(sc.spec.uris, ["dragonfly://scheduler"]),
      `Certificate ${P}-scheduler: Secret ${P}-scheduler-tls, DNS ${schedFQDN} (scheduler.addrs), URI dragonfly://scheduler`);
    check(sc && sc.spec.usages.includes("server auth") && sc.spec.usages.includes("client auth"), "the scheduler's certificate is for server and client use");
    const nc = certificate(`${P}-node`);
    check(nc && nc.spec.secretName === `${P}-node-tls` && same(nc.spec.uris, ["dragonfly://node"]) && same(nc.spec.dnsNames, ["dfc-node"]),
      `Certificate ${P}-node: the shared Secret ${P}-node-tls, URI dragonfly://node, DNS dfc-node`);
    if (kase === "cert-manager") {
      const self = find("Issuer", `${P}-selfsigned`);
      const caCert = certificate(`${P}-ca`);
      const ca = find("Issuer", `${P}-ca`);
      check(self && self.spec.selfSigned && caCert && caCert.spec.isCA === true && caCert.spec.secretName === `${P}-ca` &&
        caCert.spec.issuerRef.name === `${P}-selfsigned` && ca && ca.spec.ca.secretName === `${P}-ca`,
        "self-signed Issuer -> CA Certificate (Secret <fullname>-ca) -> CA Issuer");
      check(sc && nc && sc.spec.issuerRef.name === `${P}-ca` && nc.spec.issuerRef.name === `${P}-ca`, "the leaves are signed by the CA Issuer");
    } else {
      check(all("Issuer").length === 0 && !certificate(`${P}-ca`), "tls.issuerRef: no Issuer and no CA of the chart's own");
      check(sc && nc && same(sc.spec.issuerRef, { group: "cert-manager.io", kind: "ClusterIssuer", name: "corp-ca" }) &&
        same(nc.spec.issuerRef, sc.spec.issuerRef), "the leaves name the given ClusterIssuer");
    }
    nodeVolumeIsSharedSecret();
    break;
  }
  case "host-path": {
    tlsConfigured("mutual");
    const v = podVolume(ds, "tls");
    check(v && v.hostPath && v.hostPath.path === "/etc/dfc-node-tls" && v.hostPath.type === "Directory", "the node pods' tls volume is the hostPath /etc/dfc-node-tls");
    check(!find("Secret", `${P}-node-tls`) && !certificate(`${P}-node`), "no shared node certificate");
    nodeServerName(false);
    check(find("Secret", `${P}-ca`) && find("Secret", `${P}-scheduler-tls`), "the CA and the scheduler's Secrets are still there");
    break;
  }
  case "redis-tls":
  case "redis-tls-cert-manager": {
    const redisDir = "/etc/redis-tls";
    const conf = cmData(`${P}-redis`, "redis.conf") || "";
    const sentinel = cmData(`${P}-redis`, "start-sentinel.sh") || "";
    check(/^port 0$/m.test(conf) && /^tls-port 6379$/m.test(conf) && /^tls-auth-clients yes$/m.test(conf) &&
      /^tls-replication yes$/m.test(conf) && conf.includes(`tls-ca-cert-file ${redisDir}/ca.crt`),
      "redis.conf: TLS only (port 0, tls-port 6379), client certificates, TLS replication");
    check(sentinel.includes('echo "port 0"') && sentinel.includes('echo "tls-port 26379"') && sentinel.includes('echo "tls-replication yes"'),
      "sentinel.conf: TLS only (tls-port 26379), TLS to Redis and the other Sentinels");
    const cli = `redis-cli --tls --cacert ${redisDir}/ca.crt --cert ${redisDir}/tls.crt --key ${redisDir}/tls.key -h`;
    const scripts = (cmData(`${P}-redis`, "start-redis.sh") || "") + sentinel;
    check((scripts.match(/redis-cli/g) || []).length === (scripts.split(cli).length - 1) && scripts.includes(cli),
      "every redis-cli of the start scripts speaks TLS with the pod's certificate");
    const sts = find("StatefulSet", `${P}-redis`);
    for (const c of ["redis", "sentinel"]) {
      const m = mountOf(sts, c, "redis-tls");
      const probe = sts.spec.template.spec.containers.find((x) => x.name === c).readinessProbe.exec.command[2];
      check(m && m.mountPath === redisDir && probe.startsWith(cli), `the ${c} container mounts ${redisDir} and probes over TLS`);
    }
    const v = podVolume(sts, "redis-tls");
    check(v && v.secret.secretName === `${P}-redis-tls` && sts.spec.template.spec.securityContext.fsGroup === 999, `Secret ${P}-redis-tls, readable by the redis user`);
    check(same(sideFiles(schedCfg.database.redis.tls), FILES), "the scheduler's database.redis.tls names its own certificate");
    const names = [`${P}-redis.${NS}.svc.cluster.local`, `*.${P}-redis-headless.${NS}.svc.cluster.local`];
    if (kase === "redis-tls") {
      const s = find("Secret", `${P}-redis-tls`);
      check(s && ["ca.crt", "tls.crt", "tls.key"].every((k) => s.data[k]), `Secret ${P}-redis-tls holds ca.crt, tls.crt, tls.key`);
      dumpSecrets();
    } else {
      const c = certificate(`${P}-redis`);
      check(c && c.spec.secretName === `${P}-redis-tls` && names.every((n) => c.spec.dnsNames.includes(n)) && c.spec.issuerRef.name === `${P}-ca`,
        `Certificate ${P}-redis: Secret ${P}-redis-tls, DNS ${names.join(", ")}`);
    }
    break;
  }
  case "redis-tls-off": {
    const conf = cmData(`${P}-redis`, "redis.conf") || "";
    check(!find("Secret", `${P}-redis-tls`) && !/tls/.test(conf) && !(schedCfg.database.redis || {}).tls,
      "redis.tls.enabled=false: no Redis certificate, no TLS in redis.conf or database.redis");
    tlsConfigured("mutual");
    break;
  }
  case "tls-off": {
    const text = JSON.stringify([daemonCfg, schedCfg]);
    check(!/"(caCert|cert|key|tlsPolicy|tls)"/.test(text), "no TLS key in dfdaemon's or the scheduler's configuration");
    check(!podVolume(ds, "tls") && !podVolume(dep, "tls") && !mountOf(ds, "dfdaemon", "tls") && !mountOf(dep, "scheduler", "tls"), "no tls volume or mount");
    check(TLS_SECRETS.every((n) => !find("Secret", n)) && all("Certificate").length === 0 && all("Issuer").length === 0, "no TLS Secret, Certificate or Issuer");
    break;
  }
  case "sentinel-auth":
  case "sentinel-no-auth": {
    const script = cmData(`${P}-redis`, "start-sentinel.sh") || "";
    const redisScript = cmData(`${P}-redis`, "start-redis.sh") || "";
    const sts = find("StatefulSet", `${P}-redis`);
    const on = kase === "sentinel-auth";
    check(/requirepass/.test(script) === on && /sentinel sentinel-pass/.test(script) === on,
      `start-sentinel.sh ${on ? "sets" : "does not set"} requirepass and sentinel-pass`);
    check(/env -u REDISCLI_AUTH/.test(redisScript) === !on, `start-redis.sh asks the Sentinels ${on ? "with" : "without"} the password`);
    check(Boolean(envOf(sts, "sentinel", "REDISCLI_AUTH")) === on, `the sentinel container ${on ? "has" : "has no"} REDISCLI_AUTH (its probe, its questions to the others)`);
    check(Boolean(envOf(dep, "scheduler", "SCHEDULER_DATABASE_REDIS_SENTINELPASSWORD")) === on,
      `the scheduler ${on ? "gets" : "does not get"} SCHEDULER_DATABASE_REDIS_SENTINELPASSWORD`);
    const np = find("NetworkPolicy", `${P}-redis`);
    check(np && np.spec.ingress[0].ports.map((p) => p.port).join(",") === "redis,sentinel", "the Redis NetworkPolicy covers the redis and sentinel ports");
    break;
  }
  case "netpol-default":
  case "netpol-cidrs": {
    const sp = find("NetworkPolicy", `${P}-scheduler`);
    const rp = find("NetworkPolicy", `${P}-redis`);
    const sel = (c) => ({ "app.kubernetes.io/name": "dragonfly-csi", "app.kubernetes.io/instance": "dfc", "app.kubernetes.io/component": c });
    check(sp && same(sp.spec.podSelector.matchLabels, sel("scheduler")) && same(sp.spec.policyTypes, ["Ingress"]), "a NetworkPolicy selects the scheduler pods (ingress)");
    const grpc = sp && sp.spec.ingress.find((r) => r.ports[0].port === "grpc");
    const metrics = sp && sp.spec.ingress.find((r) => r.ports[0].port === "metrics");
    if (kase === "netpol-default") {
      check(grpc && grpc.from === undefined, "without nodeCIDRs the gRPC port admits every source (hostNetwork nodes; mutual TLS)");
    } else {
      check(grpc && same(grpc.from.slice(0, 2), [{ ipBlock: { cidr: "10.0.0.0/16" } }, { ipBlock: { cidr: "192.168.0.0/24" } }]) &&
        same(grpc.from[2], { podSelector: { matchLabels: sel("dfdaemon") } }), "with nodeCIDRs the gRPC port admits those ipBlocks and the node pods only");
    }
    check(metrics && metrics.from === undefined, "the metrics port admits every source by default");
    check(rp && same(rp.spec.podSelector.matchLabels, sel("redis")) && rp.spec.ingress.length === 1 &&
      same(rp.spec.ingress[0].from, [{ podSelector: { matchLabels: sel("scheduler") } }, { podSelector: { matchLabels: sel("redis") } }]) &&
      same(rp.spec.ingress[0].ports, [{ port: "redis", protocol: "TCP" }]),
      "Redis admits only the scheduler and Redis pods, on its port");
    break;
  }
  case "netpol-off": {
    check(all("NetworkPolicy").length === 0, "networkPolicy.enabled=false: no NetworkPolicy");
    break;
  }
  default:
    fail(`unknown case ${kase}`);
}
process.exit(failed ? 1 : 0);
