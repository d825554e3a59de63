// toolweave UI: tabs and copy buttons. Loaded as a file (the CSP allows no inline script);
// every handler is attached here, by event delegation, so htmx-swapped content works too.
(function () {
  "use strict";

  function selectTab(tab) {
    var list = tab.closest('[role="tablist"]');
    list.querySelectorAll('[role="tab"]').forEach(function (other) {
      var selected = other === tab;
      other.setAttribute("aria-selected", selected ? "true" : "false");
      other.tabIndex = selected ? 0 : -1;
      var panel = document.getElementById(other.getAttribute("aria-controls"));
      if (panel) panel.hidden = !selected;
    });
    tab.focus();
  }

  document.addEventListener("click", function (event) {
    var tab = event.target.closest('[role="tab"]');
    if (tab) { selectTab(tab); return; }
    var copy = event.target.closest("button[data-copy]");
    if (copy) {
      var source = document.getElementById(copy.dataset.copy);
      if (!source || !navigator.clipboard) return;
      navigator.clipboard.writeText(source.textContent).then(function () {
        copy.textContent = "Copied";
        setTimeout(function () { copy.textContent = "Copy"; }, 1500);
      });
    }
  });

  // The builder: a check of the form rewrites the text editor beside it, but never while someone is
  // typing there (a check sent just before they moved to the editor would overwrite their text).
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.id === "yaml" && document.activeElement === target) event.detail.shouldSwap = false;
  });

  // The builders (and the backend form) show a field's problems only once the user changed it (or saved): a form just opened
  // is not red. Each changed field's name goes into the form's `touched`, which every check and post
  // carries; the capture phase runs before htmx reads the form for the check this input triggers.
  var UNTRACKED = { csrf: 1, touched: 1, q: 1, format: 1 };
  function touch(event) {
    var field = event.target;
    var form = field && field.form;
    if (!form || !field.name || UNTRACKED[field.name]) return;
    var kept = form.elements.namedItem("touched");
    if (!kept) return;
    var name = field.name === "yaml" ? "*" : field.name;  // the text was written: every problem shows
    var names = kept.value ? kept.value.split(" ") : [];
    if (names.indexOf(name) < 0) { names.push(name); kept.value = names.join(" "); }
  }
  document.addEventListener("input", touch, true);
  document.addEventListener("change", touch, true);

  document.addEventListener("keydown", function (event) {
    var tab = event.target.closest && event.target.closest('[role="tab"]');
    if (!tab || (event.key !== "ArrowRight" && event.key !== "ArrowLeft")) return;
    var tabs = Array.prototype.slice.call(tab.closest('[role="tablist"]').querySelectorAll('[role="tab"]'));
    var next = tabs.indexOf(tab) + (event.key === "ArrowRight" ? 1 : -1);
    selectTab(tabs[(next + tabs.length) % tabs.length]);
    event.preventDefault();
  });
})();
