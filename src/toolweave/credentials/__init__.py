"""What the gateway presents to backends on behalf of a caller: OAuth grants per (tenant, user,
backend), obtained and refreshed through the official SDK's client flows (`credentials.oauth`)."""
