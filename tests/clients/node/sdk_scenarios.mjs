// Drives an MCP server with the official TypeScript SDK (@modelcontextprotocol/sdk, pinned in
// package.json) and prints ONE JSON line on stdout describing what the client observed.
//
//   node sdk_scenarios.mjs <url> <scenario> [json-args]
//
// Scenarios: initialize | call | abort | tasks | idiom | idiomTask | resources | prompts |
// subscribe (see the functions below for their json-args).
// The exit code is 0 whenever a report was printed, even when the server misbehaved (that is an
// observation: `ok` is false and `error` says why); 2 means the script itself was misused or
// crashed. tests/clients/node_clients.py copies this file next to the installed node_modules,
// so the bare `@modelcontextprotocol/sdk` imports resolve there.
//
// Every HTTP exchange the SDK makes goes through a logging fetch: the report's `http` list shows
// method, Accept, session and protocol headers, the JSON-RPC message sent, the status, the
// content type and, for SSE responses, the messages and keep-alives seen on that stream.

import fs from 'node:fs';
import { createRequire } from 'node:module';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LATEST_PROTOCOL_VERSION,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const require = createRequire(import.meta.url);
const SDK_VERSION = (() => {
  try {
    const entry = require.resolve('@modelcontextprotocol/sdk/client/index.js');
    const root = entry.slice(0, entry.lastIndexOf('/dist/'));
    return JSON.parse(fs.readFileSync(`${root}/package.json`, 'utf8')).version;
  } catch {
    return null;
  }
})();

const T0 = Date.now();
const since = () => Date.now() - T0;
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const MAX_EVENTS_PER_STREAM = 60;

// ---------------------------------------------------------------------------------------------
// The report, printed once (normally at the end; at the deadline if the scenario hangs).
// ---------------------------------------------------------------------------------------------
const report = {
  scenario: null,
  url: null,
  sdkVersion: SDK_VERSION,
  clientProtocolVersion: LATEST_PROTOCOL_VERSION,
  ok: false,
  error: null,
  http: [],
  transportErrors: [],
  unhandled: [],
};
let printed = false;

function printReport(exitCode = 0) {
  if (printed) return;
  printed = true;
  report.elapsedMs = since();
  let line;
  try {
    line = JSON.stringify(report);
  } catch (error) {
    line = JSON.stringify({ scenario: report.scenario, ok: false, error: describeError(error) });
  }
  process.stdout.write(line + '\n', () => process.exit(exitCode));
}

function describeError(error) {
  if (error === undefined || error === null) return null;
  if (!(error instanceof Error)) return { name: typeof error, message: String(error) };
  const out = { name: error.constructor?.name ?? error.name, message: error.message };
  if (error.code !== undefined) out.code = error.code;
  if (error.data !== undefined) out.data = error.data;
  if (error.cause !== undefined) out.cause = String(error.cause);
  return out;
}

process.on('unhandledRejection', reason => {
  report.unhandled.push(describeError(reason));
});

// ---------------------------------------------------------------------------------------------
// The wire log: a fetch that records each exchange (and what arrives on SSE streams).
// ---------------------------------------------------------------------------------------------
function summarize(message) {
  if (!message || typeof message !== 'object') return String(message);
  const id = message.id === undefined ? '' : `#${JSON.stringify(message.id)}`;
  if (typeof message.method === 'string') return `${message.method}${id}`;
  if (message.error) return `error${id} ${message.error.code} ${String(message.error.message).slice(0, 200)}`;
  if ('result' in message) return `result${id}`;
  return JSON.stringify(message).slice(0, 200);
}

function parseBody(body) {
  if (typeof body !== 'string') return null;
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

function summarizeBody(body) {
  const parsed = parseBody(body);
  if (parsed === null) return null;
  if (parsed === undefined) return body.slice(0, 200);
  return Array.isArray(parsed) ? parsed.map(summarize).join(',') : summarize(parsed);
}

function watchSse(entry, body) {
  const decoder = new TextDecoder();
  let buffer = '';
  let data = [];
  const flushEvent = () => {
    if (data.length === 0) return;
    const text = data.join('\n');
    data = [];
    if (entry.events.length >= MAX_EVENTS_PER_STREAM) {
      entry.eventsDropped += 1;
      return;
    }
    let what;
    try {
      what = summarize(JSON.parse(text));
    } catch {
      what = `unparsed: ${text.slice(0, 200)}`;
    }
    entry.events.push({ t: since(), msg: what });
  };
  const consume = chunk => {
    buffer += chunk;
    let nl;
    while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
      if (line === '') flushEvent();
      else if (line.startsWith(':')) entry.comments += 1;
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      else if (line.startsWith('id:')) entry.lastEventId = line.slice(3).trim();
      else if (line.startsWith('retry:')) entry.retry = line.slice(6).trim();
      else if (line.startsWith('event:')) {
        const name = line.slice(6).trim();
        if (!entry.eventNames.includes(name)) entry.eventNames.push(name);
      }
    }
  };
  return body.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        try {
          consume(decoder.decode(chunk, { stream: true }));
        } catch {
          // the log must never break the stream
        }
        controller.enqueue(chunk);
      },
      flush() {
        flushEvent();
        entry.end = 'closed';
        entry.tEnd = since();
      },
    })
  );
}

async function loggingFetch(input, init = {}) {
  const headers = new Headers(init.headers ?? {});
  const entry = {
    t: since(),
    method: init.method ?? 'GET',
    sent: summarizeBody(init.body),
    accept: headers.get('accept'),
    session: headers.get('mcp-session-id'),
    protocolVersion: headers.get('mcp-protocol-version'),
    lastEventIdSent: headers.get('last-event-id'),
  };
  const parsed = parseBody(init.body);
  if (parsed && !Array.isArray(parsed) && parsed.params) {
    // What the SDK put in params besides the call itself: task augmentation, progress token.
    if (parsed.params.task !== undefined) entry.taskParam = parsed.params.task;
    if (parsed.params._meta?.progressToken !== undefined) entry.progressToken = parsed.params._meta.progressToken;
  }
  report.http.push(entry);
  let response;
  try {
    response = await fetch(input, init);
  } catch (error) {
    entry.end = `fetch failed: ${describeError(error)?.message}`;
    throw error;
  }
  entry.status = response.status;
  entry.contentType = response.headers.get('content-type');
  entry.sessionReturned = response.headers.get('mcp-session-id');
  const isSse = (entry.contentType ?? '').toLowerCase().startsWith('text/event-stream');
  if (!isSse || !response.body || response.status < 200 || response.status > 299) {
    if (!isSse && response.status !== 202 && response.body) {
      // Peek at JSON / error bodies without consuming the original.
      try {
        const text = await response.clone().text();
        entry.body = summarizeBody(text) ?? text.slice(0, 300);
        if (response.status >= 400) entry.bodyText = text.slice(0, 500);
      } catch {
        // ignore
      }
    }
    return response;
  }
  entry.events = [];
  entry.eventNames = [];
  entry.eventsDropped = 0;
  entry.comments = 0;
  entry.end = 'open';
  try {
    const body = watchSse(entry, response.body);
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  } catch {
    return response;
  }
}

/** The HTTP exchange whose SSE stream carried a message summarized as `what`. */
function streamCarrying(what) {
  for (const entry of report.http) {
    if ((entry.events ?? []).some(e => e.msg === what)) return entry.sent ?? `${entry.method} (standalone)`;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Client set-up shared by every scenario.
// ---------------------------------------------------------------------------------------------
function simplifyTask(task) {
  if (!task || typeof task !== 'object') return task;
  const { taskId, status, statusMessage, pollInterval, ttl, createdAt, lastUpdatedAt } = task;
  return { taskId, status, statusMessage, pollInterval, ttl, createdAt, lastUpdatedAt };
}

function textOf(result) {
  const content = result?.content;
  if (!Array.isArray(content)) return null;
  return content
    .filter(c => c && c.type === 'text')
    .map(c => c.text)
    .join('\n');
}

async function openClient(url, args) {
  const capabilities = { ...(args.capabilities ?? {}) };
  if (args.elicit) capabilities.elicitation = capabilities.elicitation ?? {};
  if (args.sample) capabilities.sampling = capabilities.sampling ?? {};
  const client = new Client({ name: 'mcpq-tests-typescript-sdk', version: '1.0.0' }, { capabilities });
  report.clientCapabilities = capabilities;
  report.elicitations = [];
  report.samplings = [];
  report.notifications = [];
  if (args.elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
      report.elicitations.push({
        t: since(),
        requestId: extra.requestId,
        message: request.params.message,
        mode: request.params.mode,
        requestedSchema: request.params.requestedSchema,
        meta: request.params._meta ?? null,
        via: streamCarrying(`elicitation/create#${JSON.stringify(extra.requestId)}`),
      });
      if (args.elicitDelayMs) await sleep(args.elicitDelayMs);
      return args.elicit;
    });
  }
  if (args.sample) {
    client.setRequestHandler(CreateMessageRequestSchema, async (request, extra) => {
      report.samplings.push({
        t: since(),
        requestId: extra.requestId,
        messages: request.params.messages,
        maxTokens: request.params.maxTokens,
        meta: request.params._meta ?? null,
        via: streamCarrying(`sampling/createMessage#${JSON.stringify(extra.requestId)}`),
      });
      return args.sample;
    });
  }
  client.fallbackNotificationHandler = async notification => {
    if (report.notifications.length < 100) {
      report.notifications.push({ t: since(), method: notification.method, params: notification.params ?? null });
    }
  };
  client.onerror = error => {
    if (report.phase === 'closing') return; // aborting open streams on close is expected
    if (report.transportErrors.length < 50) report.transportErrors.push({ t: since(), ...describeError(error) });
  };
  // args.headers: sent on every request (e.g. a W3C traceparent, as an instrumented app's would).
  const requestInit = args.headers ? { headers: args.headers } : undefined;
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: loggingFetch, requestInit });
  report.phase = 'connect';
  await client.connect(transport, { timeout: args.connectTimeoutMs ?? 20000 });
  report.phase = 'connected';
  report.protocolVersion = transport.protocolVersion ?? null;
  report.sessionId = transport.sessionId ?? null;
  report.serverInfo = client.getServerVersion() ?? null;
  report.serverCapabilities = client.getServerCapabilities() ?? null;
  report.instructions = client.getInstructions() ?? null;
  return { client, transport };
}

async function closeClient(opened, args) {
  if (!opened) return;
  const { client, transport } = opened;
  report.phase = 'closing';
  if (args.terminate !== false && transport.sessionId) {
    try {
      await transport.terminateSession();
      report.terminated = 'ok';
    } catch (error) {
      report.terminated = describeError(error);
    }
  }
  try {
    await client.close();
  } catch (error) {
    report.closeError = describeError(error);
  }
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

/** initialize, then tools/list. args: {listTools?: true} */
async function scenarioInitialize({ client }, args) {
  if (args.listTools === false) return;
  report.phase = 'tools/list';
  const listed = await client.listTools();
  report.tools = listed.tools.map(t => ({
    name: t.name,
    execution: t.execution ?? null,
  }));
  report.toolsNextCursor = listed.nextCursor ?? null;
}

function callOptions(args, extra = {}) {
  const options = { timeout: args.timeoutMs ?? 30000, ...extra };
  if (args.resetTimeoutOnProgress) options.resetTimeoutOnProgress = true;
  if (args.maxTotalTimeoutMs) options.maxTotalTimeout = args.maxTotalTimeoutMs;
  if (args.progress) {
    report.progress = [];
    options.onprogress = p => {
      report.progress.push({ t: since(), progress: p.progress, total: p.total ?? null, message: p.message ?? null });
    };
  }
  return options;
}

function recordResult(result) {
  report.result = result;
  report.text = textOf(result);
  report.isError = result?.isError ?? false;
}

/**
 * One synchronous tools/call (client.callTool).
 * args: {tool, arguments?, elicit?, sample?, progress?, timeoutMs?, resetTimeoutOnProgress?,
 *        maxTotalTimeoutMs?, listToolsFirst?}
 */
async function scenarioCall({ client }, args) {
  if (args.listToolsFirst) await client.listTools();
  report.phase = 'tools/call';
  const started = Date.now();
  const result = await client.callTool(
    { name: args.tool, arguments: args.arguments ?? {} },
    CallToolResultSchema,
    callOptions(args)
  );
  report.callMs = Date.now() - started;
  recordResult(result);
  report.callStream = report.http.find(e => (e.sent ?? '').startsWith('tools/call')) ?? null;
}

function readMarker(path) {
  try {
    return fs.readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

async function waitForLine(path, line, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (readMarker(path).split('\n').includes(line)) return true;
    await sleep(50);
  }
  return false;
}

/**
 * A tools/call aborted through an AbortSignal once `markerPath` says `started`; the client stays
 * connected while it waits (up to waitCancelledMs) for the marker to say `cancelled`.
 * args: {tool, arguments, markerPath, startTimeoutMs?, waitCancelledMs?, timeoutMs?}
 */
async function scenarioAbort({ client }, args) {
  const controller = new AbortController();
  report.phase = 'tools/call';
  const call = client
    .callTool({ name: args.tool, arguments: args.arguments ?? {} }, CallToolResultSchema, {
      signal: controller.signal,
      timeout: args.timeoutMs ?? 90000,
    })
    .then(
      result => ({ settled: 'resolved', result }),
      error => ({ settled: 'rejected', error: describeError(error) })
    );
  report.phase = 'wait for started';
  report.started = await waitForLine(args.markerPath, 'started', args.startTimeoutMs ?? 20000);
  if (!report.started) {
    report.markerAtEnd = readMarker(args.markerPath);
    const early = await Promise.race([call, sleep(10).then(() => null)]);
    throw new Error(`the run never wrote 'started' (call ${early ? JSON.stringify(early) : 'pending'})`);
  }
  report.phase = 'abort';
  const abortedAt = Date.now();
  controller.abort('mcpq test aborts the call');
  report.call = await call;
  report.phase = 'wait for cancelled';
  report.cancelledSeen = await waitForLine(args.markerPath, 'cancelled', args.waitCancelledMs ?? 5000);
  report.cancelledAfterMs = report.cancelledSeen ? Date.now() - abortedAt : null;
  report.markerAtEnd = readMarker(args.markerPath);
  // The SDK's notifications/cancelled is a POST of its own, which closing the transport would
  // abort: wait (bounded) until the server has answered it, so the report shows what the server
  // said, not how fast this script closed after the run stopped.
  const isCancel = e => (e.sent ?? '').startsWith('notifications/cancelled');
  const answeredBy = Date.now() + (args.waitCancelledMs ?? 5000);
  while (Date.now() < answeredBy) {
    const pending = report.http.find(isCancel);
    if (pending && (pending.status !== undefined || pending.end !== undefined)) break;
    await sleep(20);
  }
  const sent = report.http.find(isCancel);
  report.cancelNotification = sent ? { status: sent.status ?? null, end: sent.end ?? null } : null;
  report.callStream = report.http.find(e => (e.sent ?? '').startsWith('tools/call')) ?? null;
}

/** Drain client.experimental.tasks.callToolStream; stop after taskCreated when `untilCreated`. */
async function runStream(client, params, options, untilCreated = false) {
  const messages = [];
  let taskId = null;
  for await (const message of client.experimental.tasks.callToolStream(params, CallToolResultSchema, options)) {
    const entry = { t: since(), type: message.type };
    if (message.task) entry.task = simplifyTask(message.task);
    if (message.result) {
      entry.result = message.result;
      entry.text = textOf(message.result);
    }
    if (message.error) entry.error = describeError(message.error);
    messages.push(entry);
    if (message.type === 'taskCreated') {
      taskId = message.task.taskId;
      if (untilCreated) break; // returns the generator: it stops polling
    }
  }
  return { messages, taskId };
}

async function step(name, fn) {
  const out = { ok: false };
  report.steps[name] = out;
  report.phase = `step ${name}`;
  try {
    Object.assign(out, await fn());
    out.ok = true;
  } catch (error) {
    out.error = describeError(error);
  }
  return out;
}

/**
 * The experimental tasks API (client.experimental.tasks), in steps that each record what they
 * saw, so one failing step does not hide the others.
 * args: {elicit (required: ask_color answers it), computeSeconds?, pollTimeoutMs?, timeoutMs?}
 */
async function scenarioTasks({ client }, args) {
  report.steps = {};
  const tasks = client.experimental.tasks;
  const options = { timeout: args.timeoutMs ?? 30000 };
  const seconds = args.computeSeconds ?? 1;

  await step('listTools', async () => {
    const listed = await client.listTools();
    const known = {};
    for (const name of ['slow_compute', 'ask_color', 'greet', 'failing_job']) known[name] = client.isToolTask(name);
    return { isToolTask: known, tools: listed.tools.length };
  });

  // 1. callToolStream: sends tools/call with params.task, then polls tasks/get, then tasks/result.
  await step('stream', () =>
    runStream(client, { name: 'slow_compute', arguments: { seconds, label: 'streamed' } }, options)
  );

  // 2. Manual: create the task, poll getTask until terminal, then getTaskResult.
  await step('poll', async () => {
    const created = await runStream(client, { name: 'slow_compute', arguments: { seconds, label: 'polled' } }, options, true);
    if (!created.taskId) return { created: created.messages, error: 'no taskCreated message' };
    const statuses = [];
    const deadline = Date.now() + (args.pollTimeoutMs ?? 20000);
    let task = null;
    while (Date.now() < deadline) {
      task = simplifyTask(await tasks.getTask(created.taskId, options));
      statuses.push(task.status);
      if (['completed', 'failed', 'cancelled'].includes(task.status)) break;
      await sleep(Math.min(Math.max(task.pollInterval ?? 200, 50), 1000));
    }
    const result = await tasks.getTaskResult(created.taskId, CallToolResultSchema, options);
    return { taskId: created.taskId, created: created.messages, statuses, lastTask: task, result, text: textOf(result) };
  });

  // 3. Input through tasks/result: ask_color as a task; the elicitation arrives while the SDK
  //    waits in tasks/result and the handler registered by openClient answers it.
  await step('input', async () => {
    const before = report.elicitations.length;
    const out = await runStream(client, { name: 'ask_color', arguments: {} }, options);
    return { ...out, elicitations: report.elicitations.slice(before) };
  });

  // 4. tasks/list
  await step('list', async () => {
    const seen = [];
    let cursor;
    for (let page = 0; page < 20; page++) {
      const listed = await tasks.listTasks(cursor, options);
      seen.push(...listed.tasks.map(simplifyTask));
      cursor = listed.nextCursor;
      if (!cursor) break;
    }
    return { tasks: seen };
  });

  // 5. tasks/cancel on a running task.
  await step('cancel', async () => {
    const created = await runStream(client, { name: 'slow_compute', arguments: { seconds: 60, label: 'cancelled' } }, options, true);
    if (!created.taskId) return { created: created.messages, error: 'no taskCreated message' };
    const before = [];
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline) {
      const task = await tasks.getTask(created.taskId, options);
      before.push(task.status);
      if (task.status !== 'submitted') break; // 'working' (or already something else)
      await sleep(200);
    }
    const cancelled = simplifyTask(await tasks.cancelTask(created.taskId, options));
    const after = simplifyTask(await tasks.getTask(created.taskId, options));
    return { taskId: created.taskId, statusesBefore: before, cancelResult: cancelled, after };
  });

  report.taskMethodsSent = [
    ...new Set(report.http.map(e => (e.sent ?? '').replace(/#.*$/, '')).filter(m => m.startsWith('tasks/'))),
  ];
  report.toolCallsSent = report.http
    .filter(e => (e.sent ?? '').startsWith('tools/call'))
    .map(e => ({ sent: e.sent, taskParam: e.taskParam ?? null, status: e.status ?? null }));
  report.getStreams = report.http
    .filter(e => e.method === 'GET')
    .map(e => ({ status: e.status ?? null, contentType: e.contentType ?? null, end: e.end ?? null }));
}

const SCENARIOS = {
  initialize: scenarioInitialize,
  call: scenarioCall,
  abort: scenarioAbort,
  tasks: scenarioTasks,
};

/**
 * A synchronous tools/call of a tool written in the FastMCP/SDK idiom (tests/support/idiom_tools.py):
 * the SDK's elicitation handler (openClient, `elicit`) answers its typed question, its numeric
 * progress arrives through `onprogress` and its log messages through a handler registered for
 * LoggingMessageNotificationSchema. Each log message records the HTTP exchange whose SSE stream
 * carried it (the call's own, or another). args: {tool, arguments?, elicit, timeoutMs?, setLevel?}
 * (`setLevel`: send logging/setLevel first).
 */
async function scenarioIdiom({ client }, args) {
  const { LoggingMessageNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
  report.logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, notification => {
    const { level, logger, data } = notification.params;
    report.logs.push({
      t: since(),
      level,
      logger: logger ?? null,
      data: data ?? null,
      via: streamCarrying('notifications/message'),
    });
  });
  if (args.setLevel) {
    report.phase = 'logging/setLevel';
    await client.setLoggingLevel(args.setLevel);
  }
  report.phase = 'tools/call';
  const started = Date.now();
  const result = await client.callTool(
    { name: args.tool, arguments: args.arguments ?? {} },
    CallToolResultSchema,
    callOptions({ ...args, progress: true })
  );
  report.callMs = Date.now() - started;
  recordResult(result);
  report.callStream = report.http.find(e => (e.sent ?? '').startsWith('tools/call')) ?? null;
}

SCENARIOS.idiom = scenarioIdiom;

/**
 * The same tool run as a task (client.experimental.tasks.callToolStream, after tools/list so the
 * SDK knows it as a task tool): its question comes while the SDK waits in tasks/result, and the
 * handler answers it. Log messages are recorded as in `idiom` (a task should get none).
 * args: {tool, arguments?, elicit, timeoutMs?}
 */
async function scenarioIdiomTask({ client }, args) {
  const { LoggingMessageNotificationSchema } = await import('@modelcontextprotocol/sdk/types.js');
  report.logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, notification => {
    const { level, logger, data } = notification.params;
    report.logs.push({ t: since(), level, logger: logger ?? null, data: data ?? null, via: streamCarrying('notifications/message') });
  });
  report.phase = 'tools/list';
  await client.listTools();
  report.isToolTask = client.isToolTask(args.tool);
  report.phase = 'callToolStream';
  const out = await runStream(
    client,
    { name: args.tool, arguments: args.arguments ?? {} },
    callOptions({ ...args, progress: true })
  );
  report.messages = out.messages;
  report.taskId = out.taskId;
  const last = out.messages[out.messages.length - 1];
  if (last?.result) recordResult(last.result);
  report.taskStreams = report.http
    .filter(e => /^tasks\/(result|get)/.test(e.sent ?? '') && e.events)
    .map(e => ({ sent: e.sent, events: e.events.map(x => x.msg) }));
}

SCENARIOS.idiomTask = scenarioIdiomTask;

/** What a rejected request looked like to the SDK (its McpError), or null when it succeeded. */
async function rejection(promise) {
  try {
    const result = await promise;
    return { settled: 'resolved', result };
  } catch (error) {
    return { settled: 'rejected', error: describeError(error) };
  }
}

/**
 * Resources through the SDK's own methods: client.listResources, client.listResourceTemplates,
 * client.readResource for each of `read` (text and blob contents, as the SDK parsed them), and
 * each of `refused` (URIs the server should refuse: the SDK's error, code and data).
 * args: {read: [uri...], refused?: [uri...]}
 */
async function scenarioResources({ client }, args) {
  report.phase = 'resources/list';
  const listed = await client.listResources();
  report.resources = listed.resources;
  report.resourcesNextCursor = listed.nextCursor ?? null;
  report.phase = 'resources/templates/list';
  const templates = await client.listResourceTemplates();
  report.resourceTemplates = templates.resourceTemplates;
  report.reads = {};
  for (const uri of args.read ?? []) {
    report.phase = `resources/read ${uri}`;
    const read = await client.readResource({ uri });
    report.reads[uri] = read.contents;
  }
  report.refused = {};
  for (const uri of args.refused ?? []) {
    report.phase = `resources/read ${uri} (refused)`;
    report.refused[uri] = await rejection(client.readResource({ uri }));
  }
}

SCENARIOS.resources = scenarioResources;

/**
 * Prompts and completion through the SDK's own methods: client.listPrompts, client.getPrompt
 * for each of `get` ({name, arguments}), client.complete for each of `complete` ({ref, argument,
 * context?}), and each of `refused` ({name, arguments}: prompts/get the server should refuse).
 * args: {get: [...], complete: [...], refused?: [...]}
 */
async function scenarioPrompts({ client }, args) {
  report.phase = 'prompts/list';
  const listed = await client.listPrompts();
  report.prompts = listed.prompts;
  report.got = [];
  for (const { name, arguments: given } of args.get ?? []) {
    report.phase = `prompts/get ${name}`;
    report.got.push(await client.getPrompt({ name, arguments: given }));
  }
  report.completions = [];
  for (const request of args.complete ?? []) {
    report.phase = `completion/complete ${JSON.stringify(request.ref)}`;
    const answer = await client.complete(request);
    report.completions.push(answer.completion);
  }
  report.refused = [];
  for (const { name, arguments: given } of args.refused ?? []) {
    report.phase = `prompts/get ${name} (refused)`;
    report.refused.push(await rejection(client.getPrompt({ name, arguments: given })));
  }
}

SCENARIOS.prompts = scenarioPrompts;

/**
 * A resource subscription through the SDK's own methods: client.subscribeResource, then the
 * wait for notifications/resources/updated (announced by another process: the test, once
 * `markerPath` says `subscribed`), then client.unsubscribeResource. The update comes on the
 * session's GET stream, which the SDK opens on its own after initialization: `via` says which
 * stream carried it. A handler registered for ResourceUpdatedNotificationSchema records it, as
 * an application would, rather than the fallback handler. Then a subscription the server should
 * refuse (`refusedUri`: a URI nothing serves): the SDK's error, code and data.
 * args: {uri, markerPath, waitMs?, refusedUri?}
 */
async function scenarioSubscribe({ client }, args) {
  report.updated = [];
  let heard;
  const wanted = new Promise(resolve => {
    heard = resolve;
  });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, notification => {
    const { uri } = notification.params;
    if (report.updated.length < 50) {
      report.updated.push({ t: since(), uri, via: streamCarrying('notifications/resources/updated') });
    }
    if (uri === args.uri) heard();
  });
  report.phase = 'resources/subscribe';
  report.subscribed = await rejection(client.subscribeResource({ uri: args.uri }));
  if (report.subscribed.settled !== 'resolved') return;
  fs.appendFileSync(args.markerPath, 'subscribed\n');
  report.phase = 'wait for notifications/resources/updated';
  const waited = Date.now();
  report.heard = await Promise.race([wanted.then(() => true), sleep(args.waitMs ?? 20000).then(() => false)]);
  report.heardAfterMs = report.heard ? Date.now() - waited : null;
  report.phase = 'resources/unsubscribe';
  report.unsubscribed = await rejection(client.unsubscribeResource({ uri: args.uri }));
  fs.appendFileSync(args.markerPath, 'unsubscribed\n');
  if (args.refusedUri) {
    report.phase = `resources/subscribe ${args.refusedUri} (refused)`;
    report.refused = await rejection(client.subscribeResource({ uri: args.refusedUri }));
  }
  report.getStreams = report.http
    .filter(e => e.method === 'GET')
    .map(e => ({ status: e.status ?? null, contentType: e.contentType ?? null, end: e.end ?? null }));
}

SCENARIOS.subscribe = scenarioSubscribe;

// ---------------------------------------------------------------------------------------------
async function main() {
  const [url, scenario, rawArgs] = process.argv.slice(2);
  if (!url || !SCENARIOS[scenario]) {
    process.stderr.write(`usage: node sdk_scenarios.mjs <url> <${Object.keys(SCENARIOS).join('|')}> [json-args]\n`);
    process.exit(2);
  }
  let args;
  try {
    args = rawArgs ? JSON.parse(rawArgs) : {};
  } catch (error) {
    process.stderr.write(`json-args is not JSON: ${error}\n`);
    process.exit(2);
  }
  report.scenario = scenario;
  report.url = url;
  report.args = args;
  const deadline = setTimeout(() => {
    report.error = { name: 'Deadline', message: `scenario still running after ${args.deadlineMs} ms (phase: ${report.phase})` };
    printReport(0);
  }, args.deadlineMs ?? 100000);
  let opened = null;
  try {
    opened = await openClient(url, args);
    await SCENARIOS[scenario](opened, args);
    report.ok = true;
  } catch (error) {
    report.error = describeError(error);
  } finally {
    report.phaseAtEnd = report.phase;
    await closeClient(opened, args);
    clearTimeout(deadline);
  }
  printReport(0);
}

main().catch(error => {
  process.stderr.write(`sdk_scenarios.mjs crashed: ${error?.stack ?? error}\n`);
  if (!printed) {
    report.error = describeError(error);
    report.crashed = true;
    printed = true;
    process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(2));
  }
});
