// boot.js - says on the page when the dashboard cannot start because one of
// its scripts did not load (a file missing from the installation, such as
// the vendored uPlot: /vendor/uplot/). A classic script, loaded before the
// app's module graph (index.html), so it runs when that graph fails; a
// failed fetch of any module in the graph fires "error" on the module's
// <script> element, which a capturing listener on window sees. Until the
// app's first render replaces it, #loading is on the page: an error after
// that is the app's own to show.
(function () {
  'use strict';
  var shown = false;

  function say(text) {
    var loading = document.getElementById('loading');
    var main = document.getElementById('main');
    if (shown || !loading || !main) return;
    shown = true;
    main.textContent = '';
    var p = document.createElement('p');
    p.id = 'loaderror';
    p.className = 'error';
    p.textContent = text;
    main.appendChild(p);
  }

  // Which of the files the app needs first is missing, to name it.
  function probe(src) {
    var needed = ['vendor/uplot/uPlot.esm.js', 'vendor/uplot/uPlot.min.css'];
    var missing = [];
    var left = needed.length;
    needed.forEach(function (u) {
      fetch(u, { method: 'HEAD', cache: 'no-store' }).then(function (r) {
        if (!r.ok) missing.push(u + ' (HTTP ' + r.status + ')');
      }, function () {
        missing.push(u + ' (no answer)');
      }).then(function () {
        if (--left) return;
        say('The dashboard could not start: ' + src + ' or a module it imports did not load. ' +
            (missing.length
              ? 'Missing from this installation: ' + missing.join(', ') + '. The front-end ' +
                'packages (uPlot) were not installed with it: reinstall the package, or in a ' +
                'source tree run `npm ci` in web/ and reload.'
              : 'See the browser console for the failed request, and the service log.'));
      });
    });
  }

  window.addEventListener('error', function (e) {
    var t = e.target;
    if (t && t.tagName === 'SCRIPT') probe(t.getAttribute('src') || 'a script');
    else if (e instanceof ErrorEvent && document.getElementById('loading'))
      say('The dashboard could not start: ' + e.message + ' (' + (e.filename || '') + ':' +
          (e.lineno || 0) + ').');
  }, true);
})();
