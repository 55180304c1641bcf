// Typeset the math that pymdownx.arithmatex (generic mode) marked: <span class="arithmatex">\(...\)</span>
// and <div class="arithmatex">\[...\]</div>. Only those elements are touched, so a dollar sign in code
// or in a notebook's output is left alone. KaTeX is served from the site (assets/katex/), no CDN.
// Headings are the one other place math appears: Python-Markdown's toc copies a heading's text, without
// its markup, into the navigation, so a navigation link may hold a bare \(...\); those are typeset too.
(function () {
  function render(tex, el, display) {
    katex.render(tex, el, { displayMode: display, throwOnError: false, strict: "ignore" });
  }
  function typesetNavLink(link) {
    var text = link.textContent;
    if (text.indexOf("\\(") < 0) return;
    var parts = text.split(/\\\((.*?)\\\)/);  // even: plain text, odd: TeX
    link.textContent = "";
    parts.forEach(function (part, i) {
      if (i % 2 === 0) { link.appendChild(document.createTextNode(part)); return; }
      var span = document.createElement("span");
      render(part, span, false);
      link.appendChild(span);
    });
  }
  function typeset(root) {
    (root || document).querySelectorAll(".arithmatex").forEach(function (el) {
      if (el.dataset.katex === "done") return;
      var tex = el.textContent.trim();
      var display = el.tagName === "DIV";
      if (tex.startsWith("\\(") || tex.startsWith("\\[")) tex = tex.slice(2, -2);
      else if (tex.startsWith("$$")) { tex = tex.slice(2, -2); display = true; }
      else if (tex.startsWith("$")) tex = tex.slice(1, -1);
      render(tex, el, display);
      el.dataset.katex = "done";
    });
    (root || document).querySelectorAll(".md-nav__link .md-ellipsis, .md-nav__link").forEach(function (el) {
      if (el.children.length === 0) typesetNavLink(el);
    });
    document.documentElement.dataset.math = "done";
  }
  if (typeof document$ !== "undefined") document$.subscribe(function () { typeset(document); });
  else if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { typeset(document); });
  else typeset(document);
})();
