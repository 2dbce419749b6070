// A small Node.js client of the planner's gRPC service (fleetplanner.v1).
//
//   const { PlannerClient } = require("./client");
//   const client = new PlannerClient("127.0.0.1:50051", { token: process.env.PLANNER_TOKEN });
//   await client.health();                       // "SERVING"
//   const catalog = await client.getCatalog({ gpu: "H100-SXM" });
//   const plan = await client.solve(workloadObject, { timeLimitS: 30 });
//   client.close();
//
// It loads the protos the repository ships (proto/: the service, grpc.health.v1 and
// google.rpc), so nothing is generated. Failed calls reject with a PlannerError that
// carries the gRPC code and the rich details the server sends in the
// `grpc-status-details-bin` trailer: field violations (INVALID_ARGUMENT), the
// infeasibility reasons (FAILED_PRECONDITION), the ErrorInfo reason and the request id.
"use strict";

const path = require("node:path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const protobuf = require("protobufjs");

const PROTO_ROOT = path.resolve(__dirname, "..", "..", "proto");
const LOADER_OPTIONS = {
  includeDirs: [PROTO_ROOT],
  keepCase: true, // field names as in the proto and the CLI's JSON (total_price_usd_per_hour)
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: true,
};

const definition = protoLoader.loadSync(
  ["fleetplanner/v1/planner.proto", "grpc/health/v1/health.proto"], LOADER_OPTIONS);
const loaded = grpc.loadPackageDefinition(definition);

// The error details are decoded with protobufjs from the same .proto files.
const detailsRoot = new protobuf.Root();
detailsRoot.resolvePath = (_origin, target) => {
  const local = path.join(PROTO_ROOT, target);
  return require("node:fs").existsSync(local) ? local : protobuf.util.path.resolve(_origin, target);
};
detailsRoot.loadSync(["google/rpc/status.proto", "google/rpc/error_details.proto", "fleetplanner/v1/planner.proto"],
  { keepCase: true });
const Status = detailsRoot.lookupType("google.rpc.Status");
const DETAIL_TYPES = {
  "type.googleapis.com/google.rpc.BadRequest": "badRequest",
  "type.googleapis.com/google.rpc.ErrorInfo": "errorInfo",
  "type.googleapis.com/google.rpc.RequestInfo": "requestInfo",
  "type.googleapis.com/google.rpc.RetryInfo": "retryInfo",
  "type.googleapis.com/google.rpc.PreconditionFailure": "preconditionFailure",
  "type.googleapis.com/fleetplanner.v1.Infeasibility": "infeasibility",
  "type.googleapis.com/fleetplanner.v1.Plan": "plan",
};

class PlannerError extends Error {
  constructor(grpcError) {
    const status = decodeStatus(grpcError);
    const code = Object.keys(grpc.status).find((k) => grpc.status[k] === grpcError.code) || String(grpcError.code);
    super(`${code}: ${grpcError.details}`);
    this.name = "PlannerError";
    this.code = code;
    this.details = grpcError.details;
    this.reason = status.errorInfo ? status.errorInfo.reason : undefined;
    this.requestId = status.requestInfo ? status.requestInfo.request_id : undefined;
    // [{field, description}], as the CLI lists them
    this.violations = status.badRequest ? status.badRequest.field_violations || [] : [];
    this.infeasibility = status.infeasibility ? status.infeasibility.reasons || [] : [];
    this.bestPlan = planJson(status.plan); // DEADLINE_EXCEEDED with the best plan found, if any
  }
}

function decodeStatus(grpcError) {
  const out = {};
  const raw = grpcError.metadata && grpcError.metadata.get("grpc-status-details-bin");
  if (!raw || raw.length === 0) return out;
  const status = Status.decode(raw[0]);
  for (const any of status.details || []) {
    const key = DETAIL_TYPES[any.type_url];
    if (!key) continue;
    const type = detailsRoot.lookupType(any.type_url.split("/").pop());
    out[key] = type.toObject(type.decode(any.value), { longs: Number, enums: String, defaults: false });
  }
  return out;
}

// Enum values as the CLI's plan JSON writes them: PLAN_STATUS_OPTIMAL -> "optimal".
const PLAN_ENUMS = { status: "PLAN_STATUS_", pricing: "PRICING_" };

// `oneofs: true` names the set member of each oneof (the requests' documents, the progress
// events); proto3 `optional` fields are oneofs too ("_precision": "precision"), which the
// CLI's JSON has no place for: a plan drops them, at every depth.
function withoutOptionalMarkers(value) {
  if (Array.isArray(value)) return value.map(withoutOptionalMarkers);
  if (value === null || typeof value !== "object") return value;
  const out = {};
  for (const [key, v] of Object.entries(value)) {
    if (key.startsWith("_") && typeof v === "string" && key.slice(1) === v) continue;
    out[key] = withoutOptionalMarkers(v);
  }
  return out;
}

function planJson(plan) {
  if (!plan) return plan;
  const out = withoutOptionalMarkers(plan);
  for (const [field, prefix] of Object.entries(PLAN_ENUMS)) {
    if (typeof out[field] === "string" && out[field].startsWith(prefix)) {
      out[field] = out[field].slice(prefix.length).toLowerCase();
    }
  }
  if (Array.isArray(out.services)) out.services = out.services.map(serviceJson);
  return out;
}

// Two shapes the CLI's JSON writes differently from the proto (server/convert.py's tables):
// slo.confidence's level is a number or "nominal" (the proto carries text), and each
// metric of a band (an assignment's at_load.band, its verified.ci) is [low, high] (the
// proto: a LoadBand of {low, high}; an unset end is null).
function bandPairs(band) {
  const pairs = {};
  for (const metric of ["ttft_ms", "tpot_ms", "latency_ms"]) {
    const range = band[metric];
    pairs[metric] = range ? [range.low ?? null, range.high ?? null] : null;
  }
  return pairs;
}

function serviceJson(service) {
  const out = { ...service };
  if (out.confidence && typeof out.confidence.level === "string" && out.confidence.level !== "nominal") {
    out.confidence = { ...out.confidence, level: Number(out.confidence.level) };
  }
  if (Array.isArray(out.assignments)) {
    out.assignments = out.assignments.map((a) => {
      const copy = { ...a };
      if (a.at_load && a.at_load.band) copy.at_load = { ...a.at_load, band: bandPairs(a.at_load.band) };
      if (a.verified && a.verified.ci) copy.verified = { ...a.verified, ci: bandPairs(a.verified.ci) };
      return copy;
    });
  }
  return out;
}

class PlannerClient {
  /**
   * @param {string} target "host:port"
   * @param {{token?: string, timeoutS?: number, credentials?: grpc.ChannelCredentials}} options
   */
  constructor(target, options = {}) {
    const credentials = options.credentials || grpc.credentials.createInsecure();
    const channelOptions = { "grpc.max_receive_message_length": 64 * 1024 * 1024 };
    this.timeoutS = options.timeoutS;
    this.metadata = new grpc.Metadata();
    if (options.token) this.metadata.set("authorization", `Bearer ${options.token}`);
    this.planner = new loaded.fleetplanner.v1.PlannerService(target, credentials, channelOptions);
    this.healthStub = new loaded.grpc.health.v1.Health(target, credentials, channelOptions);
  }

  close() {
    this.planner.close();
    this.healthStub.close();
  }

  _call(stub, method, request, timeoutS) {
    const deadlineS = timeoutS !== undefined ? timeoutS : this.timeoutS;
    const callOptions = deadlineS ? { deadline: new Date(Date.now() + deadlineS * 1000) } : {};
    return new Promise((resolve, reject) => {
      stub[method](request, this.metadata, callOptions, (err, response) => {
        if (err) reject(new PlannerError(err));
        else resolve(response);
      });
    });
  }

  /** "SERVING" | "NOT_SERVING" | ... of the whole server, or of one service by name. */
  async health(service = "") {
    const response = await this._call(this.healthStub, "Check", { service });
    return response.status;
  }

  /** {description, gpus, offers} of the built-in catalog; filters: {gpu, provider, region}. */
  getCatalog(filters = {}) {
    return this._call(this.planner, "GetCatalog", filters);
  }

  /**
   * The cheapest fleet for a workload (an object as in a workload JSON file, or its JSON
   * text). The server reads no files: a workload with catalog.file needs its catalog inline.
   * With timeLimitS, the call's deadline is at least timeLimitS + 10 s.
   */
  async solve(workload, { timeLimitS, explain = false, backend } = {}) {
    const request = {
      workload: { json: typeof workload === "string" ? workload : JSON.stringify(workload) },
      explain,
    };
    if (timeLimitS !== undefined) request.time_limit_s = timeLimitS;
    if (backend) request.backend = `BACKEND_${backend.toUpperCase().replace("-", "_")}`;
    const deadline = timeLimitS !== undefined ? Math.max(timeLimitS + 10, this.timeoutS || 0) : this.timeoutS;
    const response = await this._call(this.planner, "Solve", request, deadline);
    return planJson(response.plan);
  }
}

module.exports = { PlannerClient, PlannerError };
