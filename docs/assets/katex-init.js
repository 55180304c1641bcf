// Typeset the math that pymdownx.arithmatex (generic mode) marked: <span class="arithmatex">\(...\)</span>
// and <div class="arithmatex">\[...\]</div>. Only those elements are touched, so a dollar sign in code
// or in a notebook's output is left alone. KaTeX is served from the site (assets/katex/), no CDN.
(function () {
  function typeset(root) {
    (root || document).querySelectorAll(".arithmatex").forEach(function (el) {
      if (el.dataset.katex === "done") return;
      var tex = el.textContent.trim();
      var display = el.tagName === "DIV";
      if (tex.startsWith("\\(") || tex.startsWith("\\[")) tex = tex.slice(2, -2);
      else if (tex.startsWith("$$")) { tex = tex.slice(2, -2); display = true; }
      else if (tex.startsWith("$")) tex = tex.slice(1, -1);
      katex.render(tex, el, { displayMode: display, throwOnError: false, strict: "ignore" });
      el.dataset.katex = "done";
    });
    document.documentElement.dataset.math = "done";
  }
  if (typeof document$ !== "undefined") document$.subscribe(function () { typeset(document); });
  else if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { typeset(document); });
  else typeset(document);
})();
