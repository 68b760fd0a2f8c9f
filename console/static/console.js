// The console's little JavaScript: confirmation of destructive actions,
// select-all of dead-lettered messages, and the cluster page's live
// rates (two readings of /console/cluster.json, drawn on a canvas).
"use strict";

document.addEventListener("submit", (e) => {
  const form = e.target;
  const button = e.submitter;
  const ask = (button && button.dataset.confirm) || form.dataset.confirm;
  if (ask && !window.confirm(ask)) {
    e.preventDefault();
  }
});

const all = document.getElementById("select-all");
if (all) {
  all.addEventListener("change", () => {
    for (const box of document.querySelectorAll("input[name=seq]")) {
      box.checked = all.checked;
    }
  });
}

const canvas = document.getElementById("throughput");
if (canvas) {
  let last = null;
  const history = [];
  const draw = () => {
    const g = canvas.getContext("2d");
    g.clearRect(0, 0, canvas.width, canvas.height);
    const max = Math.max(10, ...history);
    g.beginPath();
    history.forEach((v, i) => {
      const x = canvas.width - (history.length - i) * 6;
      const y = canvas.height - 4 - (v / max) * (canvas.height - 20);
      if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
    });
    g.strokeStyle = "#2b6cb0";
    g.stroke();
    g.fillText("sent/s, max " + Math.round(max), 6, 12);
  };
  const poll = async () => {
    try {
      const now = await (await fetch("/console/cluster.json", { credentials: "same-origin" })).json();
      if (last) {
        const secs = (now.at - last.at) / 1000;
        let total = 0;
        for (const n of now.nodes) {
          const before = last.nodes.find((m) => m.id === n.id);
          const row = document.querySelector(`tr[data-node="${CSS.escape(n.id)}"]`);
          if (!before || !row || secs <= 0) continue;
          const sent = Math.max(0, (n.sent - before.sent) / secs);
          const completed = Math.max(0, (n.completed - before.completed) / secs);
          total += sent;
          row.querySelector("[data-rate=sent]").textContent = sent.toFixed(0);
          row.querySelector("[data-rate=completed]").textContent = completed.toFixed(0);
        }
        history.push(total);
        if (history.length > canvas.width / 6) history.shift();
        draw();
      }
      last = now;
    } catch (err) {
      // The next poll tries again.
    }
  };
  poll();
  setInterval(poll, 2000);
}
