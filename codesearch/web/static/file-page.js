// codesearch: the file and blame pages' line anchors (native ES module, no build step):
// #L12 or #L12-L14 (or ?line=12) highlights those lines and scrolls them into view; a click on a
// line number selects it, a shift-click a range from the last one.

function initFile() {
  const code = document.getElementById("code");
  if (!code) return;
  let anchor = null;

  function wanted() {
    let m = location.hash.match(/^#L(\d+)(?:-L?(\d+))?$/);
    if (!m) {
      const line = new URLSearchParams(location.search).get("line");
      m = line ? line.match(/^(\d+)(?:-L?(\d+))?$/) : null;
    }
    if (!m) return null;
    let a = parseInt(m[1], 10), b = m[2] ? parseInt(m[2], 10) : a;
    if (b < a) [a, b] = [b, a];
    return [a, b];
  }

  function mark(scroll) {
    for (const e of code.querySelectorAll(".line.hl")) e.classList.remove("hl");
    const range = wanted();
    if (!range) return;
    const [a, b] = range;
    for (let i = a; i <= b && i - a < 20000; i++) {
      const e = document.getElementById(`L${i}`);
      if (e) e.classList.add("hl");
    }
    anchor = a;
    const first = document.getElementById(`L${a}`);
    if (first && scroll) first.scrollIntoView({block: "center"});
  }

  // Shift-click on a line number selects a range from the last line clicked.
  code.addEventListener("click", (e) => {
    const ln = e.target.closest("a.ln");
    if (!ln) return;
    const n = parseInt(ln.dataset.n, 10);
    if (e.shiftKey && anchor) {
      e.preventDefault();
      const a = Math.min(anchor, n), b = Math.max(anchor, n);
      history.replaceState(null, "", a === b ? `#L${a}` : `#L${a}-L${b}`);
      mark(false);
      return;
    }
    e.preventDefault();
    history.replaceState(null, "", `#L${n}`);
    mark(false);
  });
  window.addEventListener("hashchange", () => mark(true));
  mark(true);
}

initFile();
