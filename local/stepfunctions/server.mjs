#!/usr/bin/env node
// Racecap's local stand-in for AWS Step Functions.
//
// An HTTP server speaking the Step Functions JSON 1.0 protocol (what boto3's `stepfunctions`
// client sends with `endpoint_url`), which runs the ASL files from `statemachines/` with the
// `aws-local-stepfunctions` interpreter. Task states never reach AWS: Lambda resources are
// invoked through the local gateway's Lambda Invoke HTTP API (--lambda-endpoint).
//
//   node local/stepfunctions/server.mjs --port 8083 --lambda-endpoint http://127.0.0.1:8080 [--wait-scale 1.0]
//
// Modules are loaded from $RACECAP_NODE_MODULES (default <repo>/local/node/node_modules),
// falling back to NODE_PATH.

import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MAX_TIMER_MS = 2 ** 31 - 1;
// AWS's default Task timeout (the library defaults to 60 s, as the ASL spec says).
const AWS_DEFAULT_TASK_TIMEOUT_S = 99999999;
const WAIT_RESOURCE = 'arn:aws:lambda:us-east-1:000000000000:function:racecap-local-wait';
const RFC3339 =
  /^\d{4}-(0[1-9]|1[012])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------
function parseArgs(argv) {
  const opts = {
    host: '127.0.0.1',
    port: 8083,
    lambdaEndpoint: process.env.LAMBDA_ENDPOINT || 'http://127.0.0.1:8080',
    waitScale: 1.0,
    region: 'us-east-1',
    account: '000000000000',
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const value = () => (inline !== undefined ? inline : argv[++i]);
    switch (flag) {
      case '--port': opts.port = Number(value()); break;
      case '--host': opts.host = value(); break;
      case '--lambda-endpoint': opts.lambdaEndpoint = value(); break;
      case '--wait-scale': opts.waitScale = Number(value()); break;
      case '--region': opts.region = value(); break;
      case '--account': opts.account = value(); break;
      case '-h':
      case '--help':
        console.log('usage: server.mjs --port N --lambda-endpoint URL [--wait-scale F] [--host H] [--region R] [--account A]');
        process.exit(0);
        break;
      default:
        console.error(`unknown option: ${argv[i]}`);
        process.exit(2);
    }
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) fatal(`bad --port: ${opts.port}`);
  if (!Number.isFinite(opts.waitScale) || opts.waitScale < 0) fatal(`bad --wait-scale: ${opts.waitScale}`);
  opts.lambdaEndpoint = opts.lambdaEndpoint.replace(/\/+$/, '');
  return opts;
}

function fatal(message) {
  console.error(`stepfunctions: ${message}`);
  process.exit(2);
}

function loadInterpreter() {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 22) fatal(`Node >= 22 is required (aws-local-stepfunctions 3), this is ${process.version}`);
  const modulesDir = process.env.RACECAP_NODE_MODULES || path.join(REPO_ROOT, 'local', 'node', 'node_modules');
  // A require rooted in the modules dir; it also honours NODE_PATH as a fallback.
  const requireFrom = createRequire(path.join(path.resolve(modulesDir), '_racecap_stepfunctions.cjs'));
  try {
    return requireFrom('aws-local-stepfunctions');
  } catch (err) {
    fatal(`cannot load aws-local-stepfunctions from ${modulesDir} (or NODE_PATH): ${err.message}`);
  }
  return null;
}

// setTimeout silently fires after 1 ms when given more than 2^31-1 ms (~24.8 days). The
// interpreter sleeps with setTimeout for Wait states (a registration window can open months
// ahead) and for Task timeouts (AWS's default is 99999999 s), so long delays are chained.
function installLongTimers() {
  const nativeSet = globalThis.setTimeout;
  const nativeClear = globalThis.clearTimeout;
  class LongTimeout {
    handle = null;
    ref() { this.handle?.ref(); return this; }
    unref() { this.handle?.unref(); return this; }
    hasRef() { return this.handle?.hasRef() ?? false; }
  }
  globalThis.setTimeout = function setTimeout(fn, ms, ...args) {
    if (!(Number(ms) > MAX_TIMER_MS)) return nativeSet(fn, ms, ...args);
    const timer = new LongTimeout();
    const due = Date.now() + Number(ms);
    const arm = () => {
      const left = due - Date.now();
      if (left <= 0) fn(...args);
      else timer.handle = nativeSet(arm, Math.min(left, MAX_TIMER_MS));
    };
    arm();
    return timer;
  };
  globalThis.clearTimeout = function clearTimeout(t) {
    return nativeClear(t instanceof LongTimeout ? t.handle : t);
  };
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------
class ApiError extends Error {
  constructor(type, message, status = 400) {
    super(message);
    this.type = type;
    this.status = status;
  }
}

// An error raised into the interpreter from a Task. The interpreter matches Retry/Catch
// `ErrorEquals` against `error.name` and reports `error.message` as the Cause.
class TaskError extends Error {
  constructor(name, cause, { retryable = true } = {}) {
    super(cause);
    this.name = name;
    if (!retryable) {
      this.retryable = false;
      this.catchable = false;
    }
  }
  get isRetryable() { return this.retryable ?? true; }
  get isCatchable() { return this.catchable ?? true; }
}

// ---------------------------------------------------------------------------
// Definitions
// ---------------------------------------------------------------------------
function forEachState(definition, fn) {
  for (const [name, state] of Object.entries(definition?.States ?? {})) {
    fn(name, state);
    if (state?.Type === 'Parallel') for (const branch of state.Branches ?? []) forEachState(branch, fn);
    if (state?.Type === 'Map') forEachState(state.ItemProcessor ?? state.Iterator, fn);
  }
}

function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical(value[k])]));
  }
  return value;
}

// The definition actually run: AWS's Task timeout default, and (with --wait-scale != 1)
// Wait states turned into local Tasks that sleep the scaled time.
function runDefinitionOf(definition, waitScale) {
  const copy = structuredClone(definition);
  forEachState(copy, (name, state) => {
    if (state.Type === 'Task' && state.TimeoutSeconds === undefined && state.TimeoutSecondsPath === undefined) {
      state.TimeoutSeconds = AWS_DEFAULT_TASK_TIMEOUT_S;
    }
    if (state.Type === 'Wait' && waitScale !== 1) {
      const params = { 'input.$': '$' };
      if (state.Seconds !== undefined) params.seconds = state.Seconds;
      if (state.Timestamp !== undefined) params.timestamp = state.Timestamp;
      if (state.SecondsPath !== undefined) params['seconds.$'] = state.SecondsPath;
      if (state.TimestampPath !== undefined) params['timestamp.$'] = state.TimestampPath;
      const { Type, Seconds, Timestamp, SecondsPath, TimestampPath, ...rest } = state;
      for (const key of Object.keys(state)) delete state[key];
      Object.assign(state, rest, {
        Type: 'Task',
        Resource: WAIT_RESOURCE,
        Parameters: params,
        TimeoutSeconds: AWS_DEFAULT_TASK_TIMEOUT_S,
      });
    }
  });
  return copy;
}

function parseDefinition(text, StateMachine) {
  let definition;
  try {
    definition = JSON.parse(text);
  } catch (err) {
    throw new ApiError('InvalidDefinition', `Invalid State Machine Definition: not JSON (${err.message})`);
  }
  if (!definition || typeof definition !== 'object' || Array.isArray(definition)) {
    throw new ApiError('InvalidDefinition', 'Invalid State Machine Definition: not a JSON object');
  }
  const seen = new Set();
  const stateTypes = new Map();
  const duplicates = [];
  forEachState(definition, (name, state) => {
    if (seen.has(name)) duplicates.push(name);
    seen.add(name);
    stateTypes.set(name, state?.Type);
  });
  if (duplicates.length) {
    throw new ApiError('InvalidDefinition', `Invalid State Machine Definition: duplicate state names ${duplicates.join(', ')}`);
  }
  try {
    new StateMachine(definition); // validates: schema, JSONPaths, ARNs, reachability
  } catch (err) {
    throw new ApiError('InvalidDefinition', `Invalid State Machine Definition: ${err.message}`);
  }
  return { definition, stateTypes };
}

// ---------------------------------------------------------------------------
// Task states → the local gateway's Lambda Invoke API
// ---------------------------------------------------------------------------
function functionRef(ref) {
  // name | name:qualifier | arn:...:function:name[:qualifier] | account:function:name
  const s = String(ref ?? '');
  const at = s.indexOf(':function:');
  const [name, qualifier] = (at >= 0 ? s.slice(at + ':function:'.length) : s).split(':');
  return { name, qualifier };
}

async function invokeLambda(endpoint, fnRef, payload, signal) {
  const { name, qualifier } = functionRef(fnRef);
  if (!name) throw new TaskError('Lambda.InvalidParameterValueException', `bad FunctionName: ${fnRef}`);
  const qs = qualifier ? `?Qualifier=${encodeURIComponent(qualifier)}` : '';
  const url = `${endpoint}/2015-03-31/functions/${encodeURIComponent(name)}/invocations${qs}`;
  let res;
  let text;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Amz-Invocation-Type': 'RequestResponse' },
      body: JSON.stringify(payload === undefined ? {} : payload),
      signal,
    });
    text = await res.text();
  } catch (err) {
    if (signal.aborted) throw new TaskError('States.Runtime', 'execution aborted', { retryable: false });
    throw new TaskError('Lambda.SdkClientException', `cannot reach ${url}: ${err.cause?.message ?? err.message}`);
  }
  let body = null;
  if (text.length) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  if (res.headers.get('x-amz-function-error')) {
    // As on AWS: the error name is the function's errorType, the cause its error payload.
    const errorType = (body && typeof body === 'object' && body.errorType) || 'Lambda.Unknown';
    throw new TaskError(String(errorType), text);
  }
  if (!res.ok) {
    const type = res.headers.get('x-amzn-errortype')?.split(':')[0] || (body && (body.__type || body.Type));
    const short = type ? String(type).split('#').pop() : null;
    let errorName;
    if (res.status === 429) errorName = 'Lambda.TooManyRequestsException';
    else if (res.status === 404) errorName = 'Lambda.ResourceNotFoundException';
    else if (res.status >= 500 || !short) errorName = 'Lambda.ServiceException';
    else errorName = `Lambda.${short}`;
    throw new TaskError(errorName, `Lambda Invoke ${name} returned HTTP ${res.status}: ${text.slice(0, 1000)}`);
  }
  return body;
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const onAbort = () => { clearTimeout(timer); resolve(); };
    const timer = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

async function scaledWait(params, scale, signal) {
  let ms;
  if (params.seconds !== undefined) {
    if (!Number.isInteger(params.seconds) || params.seconds < 0) {
      throw new TaskError('States.Runtime', `Wait seconds must be a non-negative integer: ${JSON.stringify(params.seconds)}`, { retryable: false });
    }
    ms = params.seconds * 1000;
  } else {
    if (typeof params.timestamp !== 'string' || !RFC3339.test(params.timestamp)) {
      throw new TaskError('States.Runtime', `Wait timestamp must be an RFC 3339 string: ${JSON.stringify(params.timestamp)}`, { retryable: false });
    }
    ms = Date.parse(params.timestamp) - Date.now();
  }
  await sleep(ms * scale, signal);
  return params.input;
}

function taskHandler(server, compiled, stateName, signal) {
  return async (input) => {
    if (signal.aborted) throw new TaskError('States.Runtime', 'execution aborted', { retryable: false });
    const state = compiled.taskStates.get(stateName);
    if (!state) throw new TaskError('States.Runtime', `no Task state named ${stateName}`, { retryable: false });
    const resource = String(state.Resource ?? '');
    if (resource === WAIT_RESOURCE) return scaledWait(input, server.opts.waitScale, signal);
    if (/^arn:aws[\w-]*:states:::lambda:invoke$/.test(resource)) {
      const payload = await invokeLambda(server.opts.lambdaEndpoint, input?.FunctionName, input?.Payload, signal);
      return { ExecutedVersion: '$LATEST', Payload: payload, StatusCode: 200 };
    }
    if (/^arn:aws[\w-]*:lambda:[^:]*:[^:]*:function:[^:]+(:[^:]+)?$/.test(resource)) {
      return invokeLambda(server.opts.lambdaEndpoint, resource, input, signal);
    }
    throw new TaskError(
      'States.Runtime',
      `Task ${stateName}: resource ${resource} is not supported by the local Step Functions (Lambda only)`,
      { retryable: false },
    );
  };
}

// ---------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------
const NAME_RE = /^[A-Za-z0-9_.-]{1,80}$/;
const EXEC_STATUSES = new Set(['RUNNING', 'SUCCEEDED', 'FAILED', 'TIMED_OUT', 'ABORTED', 'PENDING_REDRIVE']);
const nowSeconds = () => Date.now() / 1000;

class Service {
  constructor(opts, lib) {
    this.opts = opts;
    this.lib = lib;
    this.machines = new Map(); // arn -> machine
    this.executions = new Map(); // arn -> execution
  }

  machineArn(name) {
    return `arn:aws:states:${this.opts.region}:${this.opts.account}:stateMachine:${name}`;
  }

  machine(arn) {
    if (typeof arn !== 'string' || !arn.startsWith('arn:')) throw new ApiError('InvalidArn', `Invalid Arn: '${arn}'`);
    const m = this.machines.get(arn);
    if (!m) throw new ApiError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${arn}'`);
    return m;
  }

  execution(arn) {
    if (typeof arn !== 'string' || !arn.startsWith('arn:')) throw new ApiError('InvalidArn', `Invalid Arn: '${arn}'`);
    const e = this.executions.get(arn);
    if (!e) throw new ApiError('ExecutionDoesNotExist', `Execution Does Not Exist: '${arn}'`);
    return e;
  }

  compile(definitionText) {
    const { definition, stateTypes } = parseDefinition(definitionText, this.lib.StateMachine);
    const runDefinition = runDefinitionOf(definition, this.opts.waitScale);
    const taskStates = new Map();
    forEachState(runDefinition, (name, state) => { if (state.Type === 'Task') taskStates.set(name, state); });
    const interpreter = new this.lib.StateMachine(runDefinition, { validationOptions: { noValidate: true } });
    return { canonical: JSON.stringify(canonical(definition)), stateTypes, taskStates, interpreter };
  }

  // -- actions --------------------------------------------------------------
  CreateStateMachine(req) {
    const { name, definition, roleArn = '', type = 'STANDARD' } = req;
    if (typeof name !== 'string' || !NAME_RE.test(name)) throw new ApiError('InvalidName', `Invalid Name: '${name}'`);
    if (typeof definition !== 'string') throw new ApiError('ValidationException', 'definition is required');
    if (!['STANDARD', 'EXPRESS'].includes(type)) throw new ApiError('ValidationException', `bad type: ${type}`);
    const compiled = this.compile(definition);
    const arn = this.machineArn(name);
    const existing = this.machines.get(arn);
    if (existing) {
      if (existing.compiled.canonical === compiled.canonical && existing.roleArn === roleArn && existing.type === type) {
        return { stateMachineArn: arn, creationDate: existing.creationDate };
      }
      throw new ApiError('StateMachineAlreadyExists', `State Machine Already Exists: '${arn}'`);
    }
    const machine = { compiled, arn, name, roleArn, type, definitionText: definition, creationDate: nowSeconds() };
    this.machines.set(arn, machine);
    return { stateMachineArn: arn, creationDate: machine.creationDate };
  }

  UpdateStateMachine(req) {
    const m = this.machine(req.stateMachineArn);
    if (req.definition !== undefined) {
      m.compiled = this.compile(req.definition); // running executions keep the definition they started with
      m.definitionText = req.definition;
    }
    if (req.roleArn !== undefined) m.roleArn = req.roleArn;
    m.updateDate = nowSeconds();
    return { updateDate: m.updateDate };
  }

  DeleteStateMachine(req) {
    this.machine(req.stateMachineArn);
    this.machines.delete(req.stateMachineArn);
    return {};
  }

  DescribeStateMachine(req) {
    const m = this.machine(req.stateMachineArn);
    return {
      stateMachineArn: m.arn,
      name: m.name,
      status: 'ACTIVE',
      definition: m.definitionText,
      roleArn: m.roleArn,
      type: m.type,
      creationDate: m.creationDate,
    };
  }

  ListStateMachines(req) {
    const all = [...this.machines.values()]
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((m) => ({ stateMachineArn: m.arn, name: m.name, type: m.type, creationDate: m.creationDate }));
    return paginate(all, req, 'stateMachines');
  }

  StartExecution(req) {
    const m = this.machine(req.stateMachineArn);
    const name = req.name ?? randomUUID();
    if (typeof name !== 'string' || !NAME_RE.test(name)) throw new ApiError('InvalidName', `Invalid Name: '${name}'`);
    const inputText = req.input ?? '{}';
    let input;
    try {
      input = JSON.parse(inputText);
    } catch (err) {
      throw new ApiError('InvalidExecutionInput', `Invalid execution input: ${err.message}`);
    }
    const arn = `arn:aws:states:${this.opts.region}:${this.opts.account}:execution:${m.name}:${name}`;
    const existing = this.executions.get(arn);
    if (existing) {
      if (existing.status === 'RUNNING' && existing.inputText === inputText) {
        return { executionArn: arn, startDate: existing.startDate };
      }
      throw new ApiError('ExecutionAlreadyExists', `Execution Already Exists: '${arn}'`);
    }
    const exec = {
      arn,
      name,
      machine: m,
      compiled: m.compiled,
      stateMachineArn: m.arn,
      status: 'RUNNING',
      inputText,
      output: undefined,
      error: undefined,
      cause: undefined,
      startDate: nowSeconds(),
      stopDate: undefined,
      history: [],
      stop: () => {},
    };
    this.executions.set(arn, exec);
    this.run(exec, input);
    return { executionArn: arn, startDate: exec.startDate };
  }

  run(exec, input) {
    const m = exec.machine;
    const controller = new AbortController();
    const handlers = new Proxy({}, {
      get: (_, stateName) => (typeof stateName === 'string' ? taskHandler(this, exec.compiled, stateName, controller.signal) : undefined),
    });
    const startTime = new Date(exec.startDate * 1000).toISOString();
    addEvent(exec, 'ExecutionStarted', {
      executionStartedEventDetails: { input: exec.inputText, inputDetails: { truncated: false }, roleArn: m.roleArn },
    });
    log(`execution started ${exec.arn}`);
    let handle;
    try {
      handle = exec.compiled.interpreter.run(input, {
        overrides: { taskResourceLocalHandlers: handlers },
        noThrowOnAbort: true,
        context: {
          Execution: { Id: exec.arn, Name: exec.name, RoleArn: m.roleArn, StartTime: startTime },
          StateMachine: { Id: m.arn, Name: m.name },
        },
      });
    } catch (err) {
      this.finish(exec, 'FAILED', { error: 'States.Runtime', cause: String(err?.message ?? err) });
      return;
    }
    exec.stop = () => {
      controller.abort();
      handle.abort();
    };
    exec.eventsDone = this.collectEvents(exec, handle.eventLogs);
    handle.result.then(
      (output) => this.finish(exec, 'SUCCEEDED', { output: JSON.stringify(output ?? null) }),
      (err) => {
        if (err?.name === 'ExecutionTimeoutError') {
          this.finish(exec, 'TIMED_OUT', { error: 'States.Timeout', cause: 'The execution timed out (TimeoutSeconds).' });
        } else {
          const cause = err?.cause instanceof Error ? err.cause : err;
          this.finish(exec, 'FAILED', { error: cause?.name ?? 'Error', cause: String(cause?.message ?? cause) });
        }
      },
    );
  }

  async collectEvents(exec, events) {
    const types = exec.compiled.stateTypes;
    try {
      for await (const ev of events) {
        const stateName = ev.state?.name;
        const stateType = types.get(stateName) ?? ev.state?.type;
        switch (ev.type) {
          case 'StateEntered':
            addEvent(exec, `${stateType}StateEntered`, {
              stateEnteredEventDetails: { name: stateName, input: JSON.stringify(ev.state.input ?? null) },
            }, ev.timestamp);
            break;
          case 'StateExited':
            addEvent(exec, `${stateType}StateExited`, {
              stateExitedEventDetails: { name: stateName, output: JSON.stringify(ev.state.output ?? null) },
            }, ev.timestamp);
            break;
          case 'StateFailed':
            if (stateType === 'Task') {
              addEvent(exec, 'TaskFailed', {
                taskFailedEventDetails: {
                  resourceType: 'lambda',
                  resource: stateName,
                  error: ev.Error,
                  cause: String(ev.Cause?.message ?? ev.Cause ?? ''),
                },
              }, ev.timestamp);
            }
            break;
          case 'MapIterationStarted':
          case 'MapIterationSucceeded':
          case 'MapIterationFailed': {
            const key = `${ev.type[0].toLowerCase()}${ev.type.slice(1)}EventDetails`;
            addEvent(exec, ev.type, { [key]: { name: ev.parentState?.name, index: ev.index } }, ev.timestamp);
            break;
          }
          default:
            break; // execution-level events are recorded by finish()
        }
      }
    } catch (err) {
      log(`event log of ${exec.arn} broke: ${err?.message ?? err}`);
    }
  }

  finish(exec, status, { output, error, cause } = {}) {
    if (exec.status !== 'RUNNING') return; // already stopped
    exec.status = status;
    exec.stopDate = nowSeconds();
    exec.output = output;
    exec.error = error;
    exec.cause = cause;
    const stopMs = Date.now();
    const terminalEvent = () => {
      if (status === 'SUCCEEDED') {
        addEvent(exec, 'ExecutionSucceeded', { executionSucceededEventDetails: { output, outputDetails: { truncated: false } } }, stopMs);
      } else if (status === 'ABORTED') {
        addEvent(exec, 'ExecutionAborted', { executionAbortedEventDetails: dropUndefined({ error, cause }) }, stopMs);
      } else if (status === 'TIMED_OUT') {
        addEvent(exec, 'ExecutionTimedOut', { executionTimedOutEventDetails: { error, cause } }, stopMs);
      } else {
        addEvent(exec, 'ExecutionFailed', { executionFailedEventDetails: { error, cause } }, stopMs);
      }
    };
    // The interpreter's event log trails its result by a few ticks: record the execution's
    // last event after the last state event (or after 1 s, whichever comes first).
    const settled = new Promise((resolve) => setTimeout(resolve, 1000).unref());
    Promise.race([exec.eventsDone ?? Promise.resolve(), settled]).then(terminalEvent);
    const took = (exec.stopDate - exec.startDate).toFixed(3);
    log(`execution ${status.toLowerCase()} ${exec.arn} after ${took}s${error ? ` error=${error}` : ''}`);
  }

  DescribeExecution(req) {
    const e = this.execution(req.executionArn);
    return dropUndefined({
      executionArn: e.arn,
      stateMachineArn: e.stateMachineArn,
      name: e.name,
      status: e.status,
      startDate: e.startDate,
      stopDate: e.stopDate,
      input: e.inputText,
      inputDetails: { included: true },
      output: e.output,
      outputDetails: e.output === undefined ? undefined : { included: true },
      error: e.error,
      cause: e.cause,
    });
  }

  ListExecutions(req) {
    const m = this.machine(req.stateMachineArn);
    if (req.statusFilter !== undefined && !EXEC_STATUSES.has(req.statusFilter)) {
      throw new ApiError('ValidationException', `bad statusFilter: ${req.statusFilter}`);
    }
    const all = [...this.executions.values()]
      .filter((e) => e.stateMachineArn === m.arn && (!req.statusFilter || e.status === req.statusFilter))
      .sort((a, b) => b.startDate - a.startDate)
      .map((e) => dropUndefined({
        executionArn: e.arn,
        stateMachineArn: e.stateMachineArn,
        name: e.name,
        status: e.status,
        startDate: e.startDate,
        stopDate: e.stopDate,
      }));
    return paginate(all, req, 'executions');
  }

  StopExecution(req) {
    const e = this.execution(req.executionArn);
    if (e.status === 'RUNNING') {
      this.finish(e, 'ABORTED', { error: req.error, cause: req.cause });
      e.stop();
    }
    return { stopDate: e.stopDate };
  }

  GetExecutionHistory(req) {
    const e = this.execution(req.executionArn);
    const events = req.reverseOrder ? [...e.history].reverse() : e.history;
    return paginate(events, req, 'events');
  }

  stopAll(cause) {
    for (const e of this.executions.values()) {
      if (e.status === 'RUNNING') {
        this.finish(e, 'ABORTED', { error: 'States.Runtime', cause });
        e.stop();
      }
    }
  }
}

function addEvent(exec, type, details, timestampMs = Date.now()) {
  const id = exec.history.length + 1;
  exec.history.push({ timestamp: timestampMs / 1000, type, id, previousEventId: id - 1, ...details });
}

function paginate(items, req, key) {
  const start = req.nextToken ? Number.parseInt(Buffer.from(String(req.nextToken), 'base64url').toString(), 10) : 0;
  if (!Number.isInteger(start) || start < 0) throw new ApiError('InvalidToken', 'Invalid Token');
  const max = req.maxResults && req.maxResults > 0 ? req.maxResults : 100;
  const page = items.slice(start, start + max);
  const out = { [key]: page };
  if (start + max < items.length) out.nextToken = Buffer.from(String(start + max)).toString('base64url');
  return out;
}

function dropUndefined(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined));
}

function log(message) {
  console.log(`${new Date().toISOString()} stepfunctions ${message}`);
}

// ---------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------
const ACTIONS = new Set([
  'CreateStateMachine', 'UpdateStateMachine', 'DeleteStateMachine', 'DescribeStateMachine', 'ListStateMachines',
  'StartExecution', 'DescribeExecution', 'ListExecutions', 'StopExecution', 'GetExecutionHistory',
]);

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/x-amz-json-1.0',
    'Content-Length': Buffer.byteLength(text),
    'x-amzn-RequestId': randomUUID(),
  });
  res.end(text);
}

function makeServer(service) {
  return http.createServer((req, res) => {
    if (req.method === 'GET' && (req.url === '/' || req.url === '/health')) {
      send(res, 200, { status: 'ok', stateMachines: service.machines.size, executions: service.executions.size });
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      try {
        if (req.method !== 'POST') throw new ApiError('UnknownOperationException', `${req.method} is not supported`, 404);
        const target = String(req.headers['x-amz-target'] ?? '');
        const [prefix, action] = target.split('.');
        if (prefix !== 'AWSStepFunctions' || !ACTIONS.has(action)) {
          throw new ApiError('UnknownOperationException', `Unsupported operation: '${target}'`);
        }
        const raw = Buffer.concat(chunks).toString('utf8');
        let body = {};
        if (raw.trim()) {
          try {
            body = JSON.parse(raw);
          } catch {
            throw new ApiError('SerializationException', 'Request body is not valid JSON');
          }
        }
        send(res, 200, service[action](body ?? {}));
      } catch (err) {
        if (err instanceof ApiError) {
          send(res, err.status, { __type: err.type, message: err.message });
        } else {
          log(`internal error: ${err?.stack ?? err}`);
          send(res, 500, { __type: 'InternalFailure', message: String(err?.message ?? err) });
        }
      }
    });
  });
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const lib = loadInterpreter();
  installLongTimers();
  process.on('unhandledRejection', (err) => log(`unhandled rejection: ${err?.stack ?? err}`));
  const service = new Service(opts, lib);
  const server = makeServer(service);
  server.listen(opts.port, opts.host, () => {
    const { port } = server.address();
    log(`listening on http://${opts.host}:${port} lambda-endpoint=${opts.lambdaEndpoint} wait-scale=${opts.waitScale}`);
  });
  let stopping = false;
  const shutdown = (signal) => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: stopping`);
    service.stopAll(`local Step Functions server stopped (${signal})`);
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main();
