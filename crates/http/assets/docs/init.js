// posture's API reference page: renders the served contract with the vendored Scalar
// bundle. A file of its own, so the page's Content-Security-Policy allows no inline script.
(function () {
  "use strict";
  var contract = new URL("openapi.json", document.baseURI).href;
  Scalar.createApiReference("#reference", {
    url: contract,
    // Fonts, proxies, telemetry and AI helpers would reach other origins: none of them.
    withDefaultFonts: false,
    telemetry: false,
    hideClientButton: false,
    showDeveloperTools: "never",
    agent: { disabled: true },
    mcp: { disabled: true },
    documentDownloadType: "json",
    defaultOpenAllTags: true,
    metaData: { title: "posture API reference" }
  });
})();
