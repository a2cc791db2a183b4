#!/usr/bin/env node
// Checks a Grafana dashboard JSON against real /metrics scrapes (Prometheus text format): the
// JSON parses; it has a `datasource` template variable of type prometheus that every panel and
// target uses; and every metric name in every panel target's `expr` and every label_values()
// variable query is a family some scrape declares (`# TYPE NAME TYPE`), a histogram's series
// being NAME_bucket, NAME_sum and NAME_count (its bare NAME is no series). Prints one line per
// problem, naming the panel; a summary line on success.
//   node test/chart/dashboard_check.mjs DASHBOARD.json METRICS.txt...
// Exit 0: no problem; 1: problems; 2: bad command line or unreadable input.
import { readFileSync } from "node:fs";

const [dashFile, ...scrapes] = process.argv.slice(2);
if (!dashFile || scrapes.length === 0) {
  process.stderr.write("usage: node dashboard_check.mjs DASHBOARD.json METRICS.txt...\n");
  process.exit(2);
}

const families = new Map(); // name -> type
for (const f of scrapes) {
  let text;
  try {
    text = readFileSync(f, "utf8");
  } catch (e) {
    process.stderr.write(`dashboard_check: ${f}: ${e.message}\n`);
    process.exit(2);
  }
  for (const line of text.split("\n")) {
    const m = line.match(/^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/);
    if (m) families.set(m[1], m[2]);
  }
}
if (families.size === 0) {
  process.stderr.write(`dashboard_check: no "# TYPE" line in ${scrapes.join(", ")}\n`);
  process.exit(2);
}

let dash;
try {
  dash = JSON.parse(readFileSync(dashFile, "utf8"));
} catch (e) {
  console.log(`${dashFile}: not JSON: ${e.message}`);
  process.exit(1);
}

const problems = [];
const problem = (where, msg) => problems.push(`${where}: ${msg}`);

// Why NAME is no series any scrape has, or null when it is one.
function unknown(name) {
  const t = families.get(name);
  if (t === "histogram" || t === "summary") return `${name} is a ${t}: use ${name}_bucket, _sum or _count`;
  if (t) return null;
  const m = name.match(/^(.*)_(bucket|sum|count)$/);
  if (m && families.get(m[1]) === "histogram") return null;
  if (m && m[2] !== "bucket" && families.get(m[1]) === "summary") return null;
  return `${name} is not in the /metrics of any binary`;
}

const KEYWORDS = new Set(["by", "without", "on", "ignoring", "group_left", "group_right", "bool",
  "and", "or", "unless", "offset", "inf", "nan"]);

// The metric names of a PromQL expression: strings, label matchers {...}, ranges [...],
// grouping clauses by/without/on/ignoring (...) and function names removed.
function metricNames(expr) {
  let e = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
  e = e.replace(/\{[^}]*\}/g, " ").replace(/\[[^\]]*\]/g, " ");
  e = e.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  const out = [];
  for (const m of e.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*(?=\s*(\()?)/g)) {
    if (m[1]) continue; // a function
    if (KEYWORDS.has(m[0].toLowerCase())) continue;
    if (m.index > 0 && /[0-9.$]/.test(e[m.index - 1])) continue; // 1e3, $var
    out.push(m[0]);
  }
  return out;
}

// A label_values(METRIC{...}, LABEL) or label_values(LABEL) variable query: its metric, if any.
function labelValuesMetric(q) {
  const m = q.match(/^\s*label_values\(\s*(?:([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{[^}]*\})?\s*,)?\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$/);
  if (!m) return undefined;
  return m[1] || null;
}

if (typeof dash.schemaVersion !== "number") problem("dashboard", "schemaVersion missing");
const vars = (dash.templating && dash.templating.list) || [];
const dsVar = vars.find((v) => v.name === "datasource");
if (!dsVar || dsVar.type !== "datasource" || dsVar.query !== "prometheus") {
  problem("templating", 'no variable "datasource" of type datasource, query prometheus');
}
const DS_UID = "${datasource}";
let exprs = 0;
const used = new Set();

for (const v of vars) {
  if (v.type !== "query") continue;
  const where = `variable ${v.name}`;
  const q = typeof v.query === "string" ? v.query : v.query && v.query.query;
  if (!v.datasource || v.datasource.uid !== DS_UID) problem(where, `datasource is not ${DS_UID}`);
  const metric = labelValuesMetric(q || "");
  if (metric === undefined) {
    problem(where, `query ${JSON.stringify(q)} is not label_values(METRIC{...}, LABEL)`);
  } else if (metric) {
    used.add(metric);
    const why = unknown(metric);
    if (why) problem(where, why);
  }
}

const ids = new Set();
function walk(panels, where) {
  for (const p of panels || []) {
    const here = `${where}panel ${p.id} "${p.title}"`;
    if (ids.has(p.id)) problem(here, "duplicate panel id");
    ids.add(p.id);
    if (p.type === "row") {
      walk(p.panels, `${here} > `);
      continue;
    }
    if (!p.datasource || p.datasource.uid !== DS_UID) problem(here, `datasource is not ${DS_UID}`);
    if (!Array.isArray(p.targets) || p.targets.length === 0) problem(here, "no targets");
    for (const t of p.targets || []) {
      const tw = `${here} target ${t.refId}`;
      if (!t.datasource || t.datasource.uid !== DS_UID) problem(tw, `datasource is not ${DS_UID}`);
      if (typeof t.expr !== "string" || t.expr.trim() === "") {
        problem(tw, "no expr");
        continue;
      }
      exprs++;
      const names = metricNames(t.expr);
      if (names.length === 0) problem(tw, `expr ${t.expr} names no metric`);
      for (const n of names) {
        used.add(n);
        const why = unknown(n);
        if (why) problem(tw, why);
      }
    }
  }
}
walk(dash.panels, "");

if (problems.length) {
  for (const p of problems) console.log(p);
  process.exit(1);
}
console.log(`dashboard_check: ${ids.size} panels, ${exprs} exprs, ${used.size} metric names, all in /metrics (${families.size} families scraped)`);
