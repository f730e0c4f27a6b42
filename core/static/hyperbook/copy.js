// Copy buttons: <button data-copy="ID"> copies the text of the element with that id.
// A file of its own: the Content-Security-Policy allows no inline script.
"use strict";
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const label = button.dataset.label || button.textContent;
  button.dataset.label = label;
  try {
    await navigator.clipboard.writeText(source.textContent);
    button.textContent = button.dataset.copied || "✓";
  } catch (error) {
    // No clipboard (a plain-http origin, or permission refused): select the text instead.
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "⌘C / Ctrl+C";
  }
  setTimeout(() => { button.textContent = label; }, 2000);
});
