// kwire console: small enhancements over server-rendered pages (htmx does the rest).
// Charts: an element <div class="chart" data-series='{"x":[...], "ys":[[...]], "labels":[...]}'>
// becomes a uPlot line chart; htmx swaps re-run it.
(function () {
  function drawCharts(root) {
    (root || document).querySelectorAll("div.chart[data-series]").forEach(function (el) {
      if (typeof uPlot === "undefined") return;
      var s = JSON.parse(el.dataset.series);
      el.innerHTML = "";
      var series = [{}].concat(s.labels.map(function (label, i) {
        return {label: label, stroke: ["#1f6feb", "#bf3989", "#1a7f37", "#9a6700"][i % 4], width: 2};
      }));
      new uPlot({width: el.clientWidth || 600, height: 200, series: series,
                 axes: [{}, {label: s.unit || ""}]}, [s.x].concat(s.ys), el);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { drawCharts(document); });
  document.addEventListener("htmx:afterSettle", function (e) { drawCharts(e.target); });
})();
