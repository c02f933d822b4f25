"""Request and response bodies of the /v1 API, field for field as the subako SDK expects them."""
