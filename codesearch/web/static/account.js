// codesearch: the account pages' small behaviours (no build step).

// <button data-copy="ID">: copy the value of the element ID (the new API key), or its text (a
// snippet in a <pre>).
document.addEventListener("click", async (e) => {
  const button = e.target.closest("button[data-copy]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  if (!field) return;
  const label = button.textContent;
  const isInput = "value" in field;
  try {
    await navigator.clipboard.writeText(isInput ? field.value : field.textContent);
  } catch (err) {  // no clipboard API (plain http): select it for Ctrl+C
    field.focus();
    if (isInput) {
      field.select();
    } else {
      const range = document.createRange();
      range.selectNodeContents(field);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    document.execCommand && document.execCommand("copy");
  }
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = label; }, 1500);
});

// <form data-confirm="question">: ask before a destructive action (revoking a key).
document.addEventListener("submit", (e) => {
  const form = e.target;
  if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) e.preventDefault();
});

// Selecting the new key in one click.
document.addEventListener("focusin", (e) => {
  if (e.target.matches && e.target.matches("input.secret")) e.target.select();
});
