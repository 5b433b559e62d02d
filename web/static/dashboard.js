// Keeps the security dashboard current without reloading the page. The
// server streams each live region as HTML (Server-Sent Events from the
// URL in data-stream) whenever it changes; this swaps the regions in and
// says whether the page is live. Without this script the page still shows
// complete figures as of its loading.
(function () {
  "use strict";

  const root = document.querySelector("[data-stream]");
  const status = document.getElementById("live-status");
  const changed = document.getElementById("live-updated");
  if (!root || !status || !changed || typeof EventSource === "undefined") {
    return;
  }
  const url = root.getAttribute("data-stream");
  const regions = new Map();
  for (const el of root.querySelectorAll("[data-live]")) {
    regions.set(el.getAttribute("data-live"), el);
  }
  const pending = new Map();
  let source = null;
  let retryTimer = 0;
  let failures = 0;

  function setStatus(state, text) {
    if (status.getAttribute("data-state") !== state || status.textContent !== text) {
      status.setAttribute("data-state", state);
      status.textContent = text;
    }
  }

  // A region in use (focus inside it, or the pointer over one marked
  // data-hold="hover", where the Unlock buttons are) is not replaced under
  // the reader's hands; its update waits until they leave it.
  function inUse(el) {
    return el.contains(document.activeElement) ||
      (el.getAttribute("data-hold") === "hover" && el.matches(":hover"));
  }

  function apply() {
    if (pending.size === 0) {
      return;
    }
    let waiting = false;
    for (const [name, html] of pending) {
      const el = regions.get(name);
      if (!el) {
        pending.delete(name);
        continue;
      }
      if (inUse(el)) {
        waiting = true;
        continue;
      }
      // Keep sideways scroll positions of wide tables (phones).
      const scrolls = Array.from(el.querySelectorAll(".table-wrap"), (w) => w.scrollLeft);
      el.innerHTML = html;
      el.querySelectorAll(".table-wrap").forEach((w, i) => {
        if (scrolls[i]) {
          w.scrollLeft = scrolls[i];
        }
      });
      pending.delete(name);
    }
    root.toggleAttribute("data-waiting", waiting);
    changed.textContent = waiting
      ? "An update is waiting until you leave the table you are using."
      : "Last change at " + new Date().toISOString().slice(11, 19) + " UTC.";
  }

  function connect() {
    clearTimeout(retryTimer);
    if (status.getAttribute("data-state") === "static") {
      setStatus("connecting", "Connecting to live updates…");
    }
    source = new EventSource(url);
    source.addEventListener("open", () => {
      failures = 0;
      setStatus("live", "Live: figures update as traffic arrives.");
    });
    source.addEventListener("error", () => {
      if (source.readyState !== EventSource.CLOSED) {
        // The browser reconnects by itself.
        setStatus("reconnecting", "Connection lost. Reconnecting…");
        return;
      }
      // The browser gave up (an error answer, such as after signing out):
      // try again, less and less often.
      source.close();
      failures++;
      setStatus("reconnecting", failures > 3
        ? "Not live: the server cannot be reached. Still trying; reloading the page may help."
        : "Connection lost. Reconnecting…");
      retryTimer = setTimeout(connect, Math.min(30000, 1000 * 2 ** failures));
    });
    source.addEventListener("status", (e) => {
      if (e.data === "unavailable") {
        setStatus("stale", "Not live: the figures cannot be read right now and may be out of date. Retrying.");
      } else {
        setStatus("live", "Live: figures update as traffic arrives.");
      }
    });
    for (const name of regions.keys()) {
      source.addEventListener(name, (e) => {
        pending.set(name, e.data);
        apply();
      });
    }
  }

  // A held update goes in as soon as the region is free.
  root.addEventListener("focusout", () => setTimeout(apply, 0));
  root.addEventListener("pointerout", () => {
    if (pending.size > 0) {
      setTimeout(apply, 0);
    }
  });

  // A hidden tab needs no stream; it catches up when shown again.
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      clearTimeout(retryTimer);
      if (source) {
        source.close();
        source = null;
      }
      setStatus("paused", "Paused while the page is hidden.");
    } else if (!source) {
      connect();
    }
  });

  connect();
})();
