// Starts Swagger UI on /docs (a file, not an inline script: the page's CSP allows no inline script).
window.addEventListener("load", function () {
  var node = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({ url: node.dataset.specUrl, dom_id: "#swagger-ui", deepLinking: true, validatorUrl: null });
});
