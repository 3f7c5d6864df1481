/** What the tests share: a fetch that answers to order, and a bad network over real HTTP. */

export type Answer = Response | Error;

/** A fetch that gives these answers in turn (an Error is thrown); and the requests it got. */
export function answering(...answers: Answer[]) {
  const requests: Request[] = [];
  const bodies: string[] = [];
  const pending = [...answers];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    requests.push(request);
    bodies.push(await request.clone().text());
    const answer = pending.shift();
    if (answer === undefined) throw new Error("no more answers");
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { fetch: fetch as typeof globalThis.fetch, requests, bodies };
}

export function problem(status: number, code: string, headers: Record<string, string> = {}) {
  return new Response(JSON.stringify({ status, code, detail: code }), {
    status,
    headers: { "Content-Type": "application/problem+json", ...headers },
  });
}

export function json(status: number, body: unknown) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json" },
  });
}

/** fetch's error for a connection that was refused (never made), as undici throws it. */
export function refused(): Error {
  return new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
}

/** fetch's error for a connection that dropped after the request was sent. */
export function dropped(): Error {
  return new TypeError("fetch failed", { cause: { code: "UND_ERR_SOCKET" } });
}

export function sse(...items: Array<Record<string, unknown> & { id: string; type: string }>) {
  const body =
    "retry: 1000\n\n" +
    items.map((i) => `id: ${i.id}\nevent: ${i.type}\ndata: ${JSON.stringify(i)}\n\n`).join("");
  return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
}

/**
 * Real HTTP with a bad network's faults: each connection of the player's stream drops
 * after a few chunks, and the answer of the first command is lost once the service has
 * acted on it. Records each command's Idempotency-Key.
 */
export function badNetwork(streamChunks = 3) {
  const state = { streamConnections: 0, commandKeys: [] as string[] };
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const path = new URL(request.url).pathname;
    const response = await globalThis.fetch(request);
    if (path.endsWith("/commands")) {
      state.commandKeys.push(request.headers.get("Idempotency-Key") ?? "");
      if (state.commandKeys.length === 1) {
        await response.arrayBuffer();
        throw dropped();
      }
    }
    if (path === "/v1/me/stream" && response.body !== null) {
      state.streamConnections += 1;
      return new Response(dropping(response.body, streamChunks), {
        status: response.status,
        headers: response.headers,
      });
    }
    return response;
  };
  return { fetch: fetch as typeof globalThis.fetch, state };
}

/** A body whose connection drops after `chunks` chunks. */
function dropping(body: ReadableStream<Uint8Array>, chunks: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let sent = 0;
  return new ReadableStream({
    async pull(controller) {
      if (sent === chunks) {
        await reader.cancel();
        controller.error(new TypeError("terminated: the connection dropped"));
        return;
      }
      const { done, value } = await reader.read();
      if (done) controller.close();
      else {
        sent += 1;
        controller.enqueue(value);
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}
