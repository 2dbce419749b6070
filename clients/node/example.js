// node example.js HOST:PORT WORKLOAD.json [--full]
//
// Calls Health, GetCatalog and Solve on a running planner (`solver-cli serve`) and prints
// one JSON object: {health, catalog: {description, gpus, offers}, plan} (plan: status,
// price, GPUs and fleet; with --full the whole plan, as the CLI's JSON) — or, when the
// solve is refused, {health, catalog, error: {code, reason, request_id, violations,
// infeasibility}}. Exit status 0 either way; 1 when the server cannot be reached.
"use strict";

const fs = require("node:fs");
const { PlannerClient, PlannerError } = require("./client");

async function main() {
  const [target, workloadPath, flag] = process.argv.slice(2);
  if (!target || !workloadPath || (flag !== undefined && flag !== "--full")) {
    console.error("usage: node example.js HOST:PORT WORKLOAD.json [--full]");
    return 2;
  }
  const client = new PlannerClient(target, { timeoutS: 60, token: process.env.PLANNER_TOKEN });
  try {
    const out = { health: await client.health() };
    const catalog = await client.getCatalog();
    out.catalog = { description: catalog.description, gpus: catalog.gpus.length, offers: catalog.offers.length };
    try {
      const plan = await client.solve(fs.readFileSync(workloadPath, "utf8"), { timeLimitS: 30 });
      out.plan = flag === "--full" ? plan : {
        status: plan.status,
        total_price_usd_per_hour: plan.total_price_usd_per_hour,
        gpus: plan.gpus,
        fleet: plan.fleet.map((f) => ({ offer_id: f.offer_id, instances: f.instances })),
      };
    } catch (err) {
      if (!(err instanceof PlannerError)) throw err;
      out.error = {
        code: err.code, reason: err.reason, request_id: err.requestId,
        violations: err.violations, infeasibility: err.infeasibility,
      };
    }
    console.log(JSON.stringify(out, null, 2));
    return 0;
  } catch (err) {
    console.error(`error: ${err.message}`);
    return 1;
  } finally {
    client.close();
  }
}

main().then((code) => { process.exitCode = code; });
