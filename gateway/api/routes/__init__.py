"""The API's routers, one module per resource group, all under ``/api/v1``."""
