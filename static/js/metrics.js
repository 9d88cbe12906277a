// Draws the metrics page's charts with the vendored Chart.js from the JSON the server
// embeds (#metrics-data). Redrawn when htmx swaps in another scope.
(function () {
  "use strict";

  var COLORS = {
    raw: "#8c96a8",
    served: "#2f6fdf",
    saved: "#2e9e6a",
    pins: "#c2410c",
    reflections: "#7b4fd6",
    observations: "#2f6fdf",
    unobserved: "#d9a21b",
    observer: "#2f6fdf",
    reflector: "#7b4fd6",
    failures: "#d1383d",
  };
  var charts = [];

  function draw(id, config) {
    var canvas = document.getElementById(id);
    if (!canvas) return;
    config.options = Object.assign(
      { responsive: true, maintainAspectRatio: false, animation: false },
      config.options || {}
    );
    charts.push(new Chart(canvas, config));
  }

  function render() {
    charts.forEach(function (chart) { chart.destroy(); });
    charts = [];
    var source = document.getElementById("metrics-data");
    if (!source || typeof Chart === "undefined") return;
    var m = JSON.parse(source.textContent);
    var shortDays = m.days.map(function (day) { return day.slice(5); });

    draw("chart-savings", {
      type: "bar",
      data: {
        labels: ["Message tokens", "Served", "Saved"],
        datasets: [{
          label: "tokens",
          data: [m.rawTokens, m.servedTokens, m.tokensSaved],
          backgroundColor: [COLORS.raw, COLORS.served, COLORS.saved],
        }],
      },
      options: { indexAxis: "y", plugins: { legend: { display: false } } },
    });

    draw("chart-tiers", {
      type: "doughnut",
      data: {
        labels: ["Pinned quotes", "Reflections", "Observations", "Unobserved messages"],
        datasets: [{
          data: [
            m.tiers.pinTokens,
            m.tiers.reflectionTokens,
            m.tiers.observationTokens,
            m.tiers.unobservedMessageTokens,
          ],
          backgroundColor: [COLORS.pins, COLORS.reflections, COLORS.observations, COLORS.unobserved],
        }],
      },
    });

    draw("chart-compression", {
      type: "bar",
      data: {
        labels: ["Observer", "Reflector", "Overall"],
        datasets: [{
          label: "compression (×)",
          data: [m.compression.observer || 0, m.compression.reflector || 0, m.compression.overall || 0],
          backgroundColor: [COLORS.observer, COLORS.reflector, COLORS.saved],
        }],
      },
      options: { plugins: { legend: { display: false } } },
    });

    function daily(kind, key) {
      return m.daily[kind].map(function (day) { return day[key]; });
    }

    draw("chart-runs", {
      type: "bar",
      data: {
        labels: shortDays,
        datasets: [
          { label: "Observer runs", data: daily("observer", "runs"), backgroundColor: COLORS.observer, stack: "runs" },
          { label: "Reflector runs", data: daily("reflector", "runs"), backgroundColor: COLORS.reflector, stack: "runs" },
          {
            label: "Failures",
            type: "line",
            data: m.days.map(function (_, i) {
              return m.daily.observer[i].failures + m.daily.reflector[i].failures;
            }),
            borderColor: COLORS.failures,
            backgroundColor: COLORS.failures,
          },
        ],
      },
      options: { scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
    });

    draw("chart-tokens", {
      type: "line",
      data: {
        labels: shortDays,
        datasets: [
          { label: "Tokens read", data: daily("observer", "tokensIn"), borderColor: COLORS.raw, backgroundColor: COLORS.raw },
          { label: "Tokens written", data: daily("observer", "tokensOut"), borderColor: COLORS.observer, backgroundColor: COLORS.observer },
        ],
      },
      options: { scales: { y: { beginAtZero: true } } },
    });

    draw("chart-duration-days", {
      type: "line",
      data: {
        labels: shortDays,
        datasets: [
          { label: "Observer, average", data: daily("observer", "durationAvgMs"), borderColor: COLORS.observer, backgroundColor: COLORS.observer, spanGaps: true },
          { label: "Observer, slowest", data: daily("observer", "durationMaxMs"), borderColor: COLORS.observer, backgroundColor: COLORS.observer, borderDash: [4, 4], spanGaps: true },
          { label: "Reflector, average", data: daily("reflector", "durationAvgMs"), borderColor: COLORS.reflector, backgroundColor: COLORS.reflector, spanGaps: true },
          { label: "Reflector, slowest", data: daily("reflector", "durationMaxMs"), borderColor: COLORS.reflector, backgroundColor: COLORS.reflector, borderDash: [4, 4], spanGaps: true },
        ],
      },
      options: { scales: { y: { beginAtZero: true, title: { display: true, text: "ms" } } } },
    });

    draw("chart-durations", {
      type: "bar",
      data: {
        labels: ["p50", "p95", "max"],
        datasets: [
          {
            label: "Observer",
            data: [m.observer.durationMs.p50, m.observer.durationMs.p95, m.observer.durationMs.max],
            backgroundColor: COLORS.observer,
          },
          {
            label: "Reflector",
            data: [m.reflector.durationMs.p50, m.reflector.durationMs.p95, m.reflector.durationMs.max],
            backgroundColor: COLORS.reflector,
          },
        ],
      },
      options: { scales: { y: { beginAtZero: true } } },
    });
    var hours = Object.keys(m.escalations.hourly);
    draw("chart-escalations", {
      type: "bar",
      data: {
        labels: hours.map(function (hour) { return hour.slice(5, 13).replace("T", " ") + "h"; }),
        datasets: [{
          label: "escalations",
          data: hours.map(function (hour) { return m.escalations.hourly[hour]; }),
          backgroundColor: COLORS.failures,
        }],
      },
      options: {
        plugins: { legend: { display: false } },
        scales: { y: { beginAtZero: true, ticks: { precision: 0 } } },
      },
    });
    window.memdeskCharts = charts;
  }

  var drawnFor = null; // the #charts element the current charts belong to

  function renderIfSwapped() {
    var container = document.getElementById("charts");
    if (container === drawnFor) return;
    drawnFor = container;
    render();
  }

  document.addEventListener("DOMContentLoaded", renderIfSwapped);
  document.addEventListener("htmx:afterSettle", renderIfSwapped);
})();
