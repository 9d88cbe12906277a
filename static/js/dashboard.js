// Memdesk dashboard behaviour. Every feature here has a plain-link fallback in the HTML;
// this file only makes it quicker: selecting memory highlights its sources in place,
// columns start scrolled to the newest items, and htmx errors are shown, not swallowed.
(function () {
  "use strict";

  function announce(text) {
    var status = document.getElementById("selection-status");
    if (status) status.textContent = text;
  }

  function flash(text) {
    var box = document.getElementById("flash");
    if (!box) return;
    box.textContent = text;
    box.hidden = false;
    clearTimeout(box._timer);
    box._timer = setTimeout(function () { box.hidden = true; }, 6000);
  }

  // --- scrolling --------------------------------------------------------------------------
  function scrollIntoColumn(element) {
    element.scrollIntoView({ block: "center", behavior: "instant" });
  }

  function settleColumns(root) {
    (root || document).querySelectorAll("[data-scroll]").forEach(function (list) {
      var target = list.querySelector(".is-highlighted");
      if (list.dataset.scroll === "highlight" && target) {
        scrollIntoColumn(target);
      } else if (list.dataset.scroll === "bottom") {
        list.scrollTop = list.scrollHeight;
      }
      // Only on first display: later loads keep the reader's position.
      list.dataset.scroll = "";
    });
  }

  // --- selection and highlighting -----------------------------------------------------------
  function clearMarks(container, className) {
    if (!container) return;
    container.querySelectorAll("." + className).forEach(function (el) {
      el.classList.remove(className);
    });
  }

  function markSources(list, attribute, ids) {
    var found = [];
    ids.forEach(function (id) {
      var el = list.querySelector("[" + attribute + '="' + id + '"]');
      if (el) {
        el.classList.add("is-highlighted");
        found.push(el);
      }
    });
    return found;
  }

  function select(item) {
    var isObservation = item.classList.contains("obs");
    var list = document.getElementById(isObservation ? "message-list" : "observation-list");
    var attribute = isObservation ? "data-message-id" : "data-observation-id";
    var noun = isObservation ? "message" : "observation";
    if (!list) return;
    document.querySelectorAll(".memory-item.is-selected").forEach(function (el) {
      if (el !== item) el.classList.remove("is-selected");
    });
    item.classList.add("is-selected");
    clearMarks(list, "is-highlighted");
    var ids = (item.dataset.sources || "").split(/\s+/).filter(Boolean);
    if (!ids.length) {
      announce("This item has no source " + noun + "s.");
      return;
    }
    var found = markSources(list, attribute, ids);
    if (found.length === ids.length) {
      scrollIntoColumn(found[0]);
      announce(found.length + " source " + noun + (found.length === 1 ? "" : "s") + " highlighted.");
      return;
    }
    // Some sources are outside what is loaded: fetch a window that holds them; the
    // server marks them, and the afterSettle handler scrolls to the first one.
    list.dataset.scroll = "highlight";
    htmx.ajax("GET", item.dataset.jumpUrl, { target: list, swap: "innerHTML" }).then(function () {
      var marked = list.querySelectorAll(".is-highlighted").length;
      announce(marked + " source " + noun + (marked === 1 ? "" : "s") + " highlighted.");
    });
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    var sourcesLink = target.closest(".sources-link");
    var item = target.closest(".memory-item.obs, .memory-item.refl");
    if (!item || item.classList.contains("deleted")) return;
    if (sourcesLink) {
      event.preventDefault();
      select(item);
      return;
    }
    // A click on the text selects; clicks on links, buttons and forms do their own thing.
    if (target.closest("a, button, input, select, textarea, label, form, summary, .item-panel")) return;
    select(item);
  });

  // --- panels (edit, delete, history) --------------------------------------------------------
  document.addEventListener("click", function (event) {
    var close = event.target.closest("[data-close-panel]");
    if (!close) return;
    var panel = close.closest(".item-panel");
    if (!panel) return; // a full page: the link goes back to the conversation
    event.preventDefault();
    panel.innerHTML = "";
    var item = panel.closest(".memory-item");
    var focusable = item && item.querySelector(".item-actions a");
    if (focusable) focusable.focus();
  });

  // --- keyboard ---------------------------------------------------------------------------------
  // Items are focusable (tabindex=0). Enter on an observation or reflection selects it as
  // a click would; 1/2/3 jump between the columns, j/k (or the arrows) move within one.
  var COLUMNS = { "1": "message-list", "2": "observation-list", "3": "reflection-list" };
  var ITEMS = ".msg, .memory-item.obs, .memory-item.refl";

  function typing(target) {
    return target.closest("input, textarea, select, [contenteditable], .item-panel, details[open] form");
  }

  function focusColumn(listId) {
    var list = document.getElementById(listId);
    if (!list) return;
    var item = list.querySelector(".is-selected, .is-highlighted") || list.querySelector(ITEMS);
    if (item) {
      item.focus();
      item.scrollIntoView({ block: "nearest" });
    } else {
      list.closest(".column").querySelector("h2").setAttribute("tabindex", "-1");
      list.closest(".column").querySelector("h2").focus();
    }
  }

  function step(item, forward) {
    var items = Array.prototype.filter.call(item.parentElement.children, function (el) {
      return el.matches(ITEMS);
    });
    var next = items[items.indexOf(item) + (forward ? 1 : -1)];
    if (next) {
      next.focus();
      next.scrollIntoView({ block: "nearest" });
    }
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) return;
    if (COLUMNS[event.key] && document.getElementById("columns")) {
      event.preventDefault();
      focusColumn(COLUMNS[event.key]);
      return;
    }
    var item = event.target.closest && event.target.closest(ITEMS);
    if (!item || item !== event.target) return;
    if (event.key === "j" || event.key === "ArrowDown") {
      event.preventDefault();
      step(item, true);
    } else if (event.key === "k" || event.key === "ArrowUp") {
      event.preventDefault();
      step(item, false);
    } else if ((event.key === "Enter" || event.key === " ") && !item.classList.contains("msg")) {
      event.preventDefault();
      if (!item.classList.contains("deleted")) select(item);
    }
  });

  document.addEventListener("click", function (event) {
    var link = event.target.closest("[data-column-link]");
    if (!link) return;
    event.preventDefault();
    focusColumn({ messages: "message-list", observations: "observation-list", reflections: "reflection-list" }[link.dataset.columnLink]);
  });

  // --- small conveniences -----------------------------------------------------------------------
  document.addEventListener("focusin", function (event) {
    if (event.target.matches("[data-select-on-focus]")) event.target.select();
  });

  // --- htmx ---------------------------------------------------------------------------------------
  // A column that reloads by itself waits while an edit, delete or history panel in it is
  // open, so that a reload never throws away what someone is typing. data-hold-while-editing
  // names the triggers that wait: an event's name, or "poll" for an "every" trigger (which
  // comes with no event). An htmx event filter would need eval, which the
  // Content-Security-Policy refuses.
  document.addEventListener("htmx:confirm", function (event) {
    var list = event.detail.elt;
    var held = ((list.dataset && list.dataset.holdWhileEditing) || "").split(/\s+/);
    var trigger = event.detail.triggeringEvent ? event.detail.triggeringEvent.type : "poll";
    if (held.indexOf(trigger) !== -1 && list.querySelector(".item-panel:not(:empty)")) {
      event.preventDefault();
    }
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    settleColumns(document);
    var target = event.detail.target;
    if (target && target.classList && target.classList.contains("item-panel")) {
      var first = target.querySelector("textarea, input:not([type=hidden]), select, a");
      if (first) first.focus();
    }
  });

  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr.status;
    var messages = {
      403: "You don't have the role this needs. Reload the page to see what you may do.",
      404: "That no longer exists (it may have been deleted). Reload the page.",
    };
    flash(messages[status] || "The server could not do that (HTTP " + status + "). Try again.");
  });

  document.addEventListener("htmx:sendError", function () {
    flash("The server did not answer. Check the connection and try again.");
  });

  document.addEventListener("DOMContentLoaded", function () {
    settleColumns(document);
  });

  // Print buttons (an erasure receipt) need script; without it they stay hidden and the
  // browser's own Print command uses the same print stylesheet.
  function showPrintButtons(root) {
    root.querySelectorAll("[data-print]").forEach(function (button) {
      button.hidden = false;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    showPrintButtons(document);
  });
  document.addEventListener("htmx:load", function (event) {
    showPrintButtons(event.detail.elt);
  });
  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-print]")) {
      window.print();
    }
  });
})();

// The header's menu on a phone: "Menu" unfolds and folds the links (CSS hides them only
// when this script runs, so without it they stay shown).
(function () {
  document.documentElement.classList.add("js");
  document.addEventListener("click", function (event) {
    const toggle = event.target.closest(".menu-toggle");
    if (!toggle) return;
    const header = toggle.closest(".topbar");
    const open = header.classList.toggle("is-open");
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  });
})();
