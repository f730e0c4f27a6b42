// The discovery console: once a discovery or a call is sent, the buttons wait and a timer shows
// that it is running (the page is replaced by the answer, which says how long it took).
// A file of its own: the Content-Security-Policy allows no inline script.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("console-form");
  const running = document.getElementById("running");
  if (!form || !running) return;
  form.addEventListener("submit", (event) => {
    const pressed = event.submitter;
    if (pressed && pressed.name) {
      // Disabled buttons are not sent: carry the pressed one's value in a hidden field.
      const carried = document.createElement("input");
      carried.type = "hidden";
      carried.name = pressed.name;
      carried.value = pressed.value;
      form.appendChild(carried);
    }
    form.querySelectorAll("button[type=submit]").forEach((button) => { button.disabled = true; });
    form.setAttribute("aria-busy", "true");
    const started = performance.now();
    running.hidden = false;
    const tick = () => {
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      running.textContent = `${running.dataset.running} ${seconds} s`;
    };
    tick();
    setInterval(tick, 100);
  });
});
