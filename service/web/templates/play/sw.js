// The web table's service worker: it keeps the page's shell (the page, its script, its
// styles, its manifest and icons), so that the table opens without a network (then says
// the connection is lost, and reconnects). It never keeps an answer of the API: a match,
// a table or a stream is always the service's own, now.
const SHELL = {{ shell | tojson }};
const FILES = {{ files | tojson }};

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches
      .open(SHELL)
      .then((cache) => cache.addAll(FILES))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) =>
        Promise.all(
          names
            .filter((name) => name.startsWith("ddz-play-") && name !== SHELL)
            .map((name) => caches.delete(name)),
        ),
      )
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== "GET" || url.origin !== self.location.origin) return;
  if (request.mode === "navigate" && url.pathname === "/play/") {
    // The page from the network when there is one (a new version at once), else kept.
    event.respondWith(
      fetch(request).catch(() => caches.match("/play/", { cacheName: SHELL, ignoreSearch: true })),
    );
  } else if (FILES.includes(url.pathname + url.search)) {
    event.respondWith(
      caches.match(request, { cacheName: SHELL }).then((kept) => kept ?? fetch(request)),
    );
  }
  // Anything else, the API above all, goes to the network as if there were no worker.
});
