"""Hosted speech APIs: the shared HTTP client (``http``), response cache (``cache``), the common
backend with cost accounting (``base``) and the vendor backends (``vendors``). See docs/hosted.md."""
