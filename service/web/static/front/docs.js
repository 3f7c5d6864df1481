// The API reference: Swagger UI on this service's own contract, with nothing fetched from
// elsewhere (no validator badge).
window.addEventListener("load", () => {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
  });
});
