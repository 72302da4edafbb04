// Live updates for the console (docs/architecture.md, "Live updates"): WebSocket messages,
// partial refresh, countdowns.
//
// The page says what it wants with data attributes (no build step, no framework):
//   <body data-live-groups="dashboard certificate:web" data-poll-interval="5">
//   <section data-live-refresh="/partial/url" data-live-topics="dashboard">  re-fetched when
//       a message for one of its topics arrives (debounced), or every poll interval while
//       the WebSocket is unavailable
//   <time data-countdown="2026-01-01T00:00:00Z">  ticked locally every second
//   <span id="live-status" role="status">  "live" / "reconnecting…" / "live updates paused"
// Every message is also dispatched as a `live:message` CustomEvent on document.
//
// Live updates are paused (and the sections polled) when the socket cannot connect, or when
// the server says {"type": "paused"} (its channel layer, Redis, is down; the socket stays
// open). {"type": "resumed"} ends that: polling stops and every section is fetched once.
(function () {
  "use strict";

  var BACKOFF_MIN_MS = 1000;
  var BACKOFF_MAX_MS = 30000;
  var FAILURES_BEFORE_POLLING = 3;
  var DEBOUNCE_MS = 250;
  var CLOSE_UNAUTHENTICATED = 4401;
  var CLOSE_FORBIDDEN = 4403;

  var body = document.body;
  var pollSeconds = Math.max(1, parseFloat(body.getAttribute("data-poll-interval")) || 5);
  var socket = null;
  var failures = 0;
  var reconnectTimer = null;
  var pollTimer = null;
  var gaveUp = false;
  var serverPaused = false; // the server said its channel layer is down

  // -- countdowns ----------------------------------------------------------------------
  // Two most significant units, as the server renders them (issuance/timing/durations.py,
  // format_span and format_relative: change both together): "in 59m 58s", "5s ago", "now".
  function humanize(seconds) {
    var total = Math.round(Math.abs(seconds));
    var days = Math.floor(total / 86400);
    var hours = Math.floor((total % 86400) / 3600);
    var minutes = Math.floor((total % 3600) / 60);
    var secs = total % 60;
    if (days) return days + "d " + hours + "h";
    if (hours) return hours + "h " + minutes + "m";
    if (minutes) return minutes + "m " + secs + "s";
    return secs + "s";
  }

  function relative(target, now) {
    var seconds = (target - now) / 1000;
    if (Math.abs(seconds) < 1) return "now";
    return seconds > 0 ? "in " + humanize(seconds) : humanize(seconds) + " ago";
  }

  function tickCountdowns(root) {
    var now = Date.now();
    (root || document).querySelectorAll("time[data-countdown]").forEach(function (el) {
      var target = Date.parse(el.getAttribute("data-countdown"));
      if (isNaN(target)) return;
      var text = relative(target, now);
      if (el.textContent !== text) el.textContent = text;
      el.setAttribute("data-countdown-state", target > now ? "future" : "past");
    });
  }

  // -- partial refresh -----------------------------------------------------------------
  function sections() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-live-refresh]"));
  }

  function topicsOf(el) {
    return (el.getAttribute("data-live-topics") || "").split(/\s+/).filter(Boolean);
  }

  function userIsEditing(el) {
    // Replacing a section would wipe what someone is typing (a deny reason, a search).
    var active = document.activeElement;
    return !!active && el.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
  }

  function refresh(el) {
    var state = el.__live || (el.__live = {});
    if (document.hidden || userIsEditing(el)) {
      state.stale = true; // done on visibilitychange / focusout
      return;
    }
    if (state.inFlight) {
      state.again = true; // one more fetch after this one, never several in parallel
      return;
    }
    state.inFlight = true;
    state.stale = false;
    fetch(el.getAttribute("data-live-refresh"), {
      credentials: "same-origin",
      // X-Live-Refresh: made by the page, not the user, so it does not hold off the
      // idle sign-out (console.sessions).
      headers: { "X-Requested-With": "XMLHttpRequest", "X-Live-Refresh": "1", Accept: "text/html" },
    })
      .then(function (response) {
        // A redirect (to the login page) or an error keeps the old content.
        if (!response.ok || response.redirected) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        if (userIsEditing(el)) {
          state.stale = true;
          return;
        }
        el.innerHTML = html;
        tickCountdowns(el);
        el.dispatchEvent(new CustomEvent("live:refreshed", { bubbles: true }));
      })
      .catch(function () {})
      .then(function () {
        state.inFlight = false;
        if (state.again) {
          state.again = false;
          schedule(el);
        }
      });
  }

  function schedule(el) {
    var state = el.__live || (el.__live = {});
    clearTimeout(state.timer);
    state.timer = setTimeout(function () {
      refresh(el);
    }, DEBOUNCE_MS);
  }

  function refreshStale() {
    sections().forEach(function (el) {
      if (el.__live && el.__live.stale) schedule(el);
    });
  }

  // -- status indicator -----------------------------------------------------------------
  var statusEl = document.getElementById("live-status");
  var STATUS_TEXT = { live: "live", reconnecting: "reconnecting…", paused: "live updates paused" };

  function setStatus(state) {
    if (!statusEl) return;
    if (statusEl.getAttribute("data-state") === state) return; // no repeated announcements
    statusEl.setAttribute("data-state", state);
    statusEl.textContent = STATUS_TEXT[state] || state;
    statusEl.title =
      state === "live"
        ? "Live updates: this page changes as soon as something happens"
        : state === "paused"
          ? "Live updates are paused (the server cannot push them right now): this page " +
            "refreshes every " + pollSeconds + " s, and live updates resume by themselves"
          : "Connection lost: reconnecting";
  }

  // -- polling fallback -------------------------------------------------------------------
  function startPolling() {
    setStatus("paused");
    if (pollTimer) return;
    pollTimer = setInterval(function () {
      sections().forEach(refresh);
    }, pollSeconds * 1000);
  }

  function stopPolling() {
    clearInterval(pollTimer);
    pollTimer = null;
  }

  // -- WebSocket --------------------------------------------------------------------------
  function wantedTopics() {
    var seen = {};
    (body.getAttribute("data-live-groups") || "").split(/\s+/).forEach(function (t) {
      if (t) seen[t] = true;
    });
    sections().forEach(function (el) {
      topicsOf(el).forEach(function (t) {
        seen[t] = true;
      });
    });
    return Object.keys(seen);
  }

  function onMessage(event) {
    var message;
    try {
      message = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    document.dispatchEvent(new CustomEvent("live:message", { detail: message }));
    if (message.type === "paused") {
      serverPaused = true;
      startPolling();
      return;
    }
    if (message.type === "resumed") {
      serverPaused = false;
      goLive();
      sections().forEach(schedule); // nothing was pushed while paused
      return;
    }
    if (message.type === "subscribed" && !serverPaused) goLive();
    if (!message.group) return; // subscribed / pong / error replies
    sections().forEach(function (el) {
      if (topicsOf(el).indexOf(message.group) !== -1) schedule(el);
    });
  }

  function goLive() {
    stopPolling();
    setStatus("live");
  }

  function backoffDelay() {
    // Exponential with full jitter, so a restarted server is not hit by every tab at once.
    var ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * Math.pow(2, failures - 1));
    return Math.max(BACKOFF_MIN_MS / 2, Math.random() * ceiling);
  }

  function connect() {
    clearTimeout(reconnectTimer);
    if (gaveUp || !("WebSocket" in window)) {
      startPolling();
      return;
    }
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var opened = false;
    try {
      socket = new WebSocket(scheme + location.host + "/ws/live/");
    } catch (e) {
      failures += 1;
      reconnect();
      return;
    }
    socket.onopen = function () {
      opened = true;
      serverPaused = false;
      var resync = failures > 0 || pollTimer !== null;
      failures = 0;
      var topics = wantedTopics();
      // Live once the server confirms the subscription (it says "paused" instead when it
      // cannot push); polling goes on until then.
      if (topics.length) socket.send(JSON.stringify({ subscribe: topics }));
      else goLive();
      // Whatever happened while disconnected was missed: fetch fresh parts once.
      if (resync) sections().forEach(schedule);
    };
    socket.onmessage = onMessage;
    socket.onclose = function (event) {
      socket = null;
      serverPaused = false;
      if (event.code === CLOSE_UNAUTHENTICATED || event.code === CLOSE_FORBIDDEN) {
        // Signed out or no role: retrying the socket cannot help; polling shows the truth.
        gaveUp = true;
        startPolling();
        return;
      }
      if (!opened || event.code !== 1000) failures += 1;
      reconnect();
    };
  }

  function reconnect() {
    if (failures >= FAILURES_BEFORE_POLLING) {
      startPolling(); // and keep trying the socket, at the slow end of the backoff
    } else {
      setStatus("reconnecting");
    }
    reconnectTimer = setTimeout(connect, backoffDelay());
  }

  // -- start --------------------------------------------------------------------------------
  function start() {
    tickCountdowns();
    setInterval(tickCountdowns, 1000);
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) refreshStale();
    });
    document.addEventListener("focusout", function () {
      setTimeout(refreshStale, 0);
    });
    // Anonymous pages (login) have no status indicator and nothing live to subscribe to.
    if (!statusEl) return;
    connect();
  }

  window.IssuanceLive = {
    relative: relative,
    humanize: humanize,
    tick: tickCountdowns,
    refresh: refresh,
    state: function () {
      return {
        connected: !!socket && socket.readyState === 1,
        failures: failures,
        polling: pollTimer !== null,
        serverPaused: serverPaused,
      };
    },
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
