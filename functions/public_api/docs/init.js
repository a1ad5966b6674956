// Swagger UI for the document PublicApi serves. A file, not an inline script: the content
// security policy allows no inline script.
window.ui = SwaggerUIBundle({
  url: "/api/openapi.json",
  dom_id: "#swagger-ui",
  docExpansion: "list",
  deepLinking: true,
  filter: true,
  layout: "BaseLayout",
  presets: [SwaggerUIBundle.presets.apis],
});
