# syntax=docker/dockerfile:1

# Build stage: a static binary, with the module download in its own layer so
# that a change to the source does not download the modules again.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION is the release `xcloak version` and xcloak_build_info report
# (docker build --build-arg VERSION=v1.2.0); empty, they say devel.
ARG VERSION=
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/xcloak ./cmd/xcloak

# Final stage: no shell and no package manager; CA certificates for
# rediss://, TLS to Postgres and SMTP; user 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/xcloak /xcloak
USER nonroot:nonroot
EXPOSE 8080
ENV XCLOAK_ADDR=0.0.0.0:8080
# The image has no shell or curl: xcloak healthcheck asks GET /readyz on
# XCLOAK_ADDR itself, within 3 s, and exits 0 on a 200, as compose asks.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/xcloak", "healthcheck"]
ENTRYPOINT ["/xcloak"]
CMD ["serve"]
