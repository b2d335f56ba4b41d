# Static etcdhook on distroless, running as nonroot. The binary is /etcdhook: the member pod's init
# container and the Jobs the hook emits run it by that path.
# `make image` does not use this file: it builds the release image with Go only, FROM scratch and
# reproducibly (cmd/etcdhook/image). This Dockerfile is kept for those who build with Docker
# (`docker build -t IMAGE .`) and gives an image that runs the same way (same path, user and
# entrypoint; distroless also brings a CA bundle, which the binary does not need: cmd/etcdhook/roots.go).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# disable_grpc_modules: as the Makefile's GOTAGS (a smaller binary; the GCS store speaks HTTP).
RUN CGO_ENABLED=0 go build -trimpath -tags disable_grpc_modules -ldflags "-s -w -X main.version=${VERSION}" -o /etcdhook ./cmd/etcdhook

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /etcdhook /etcdhook
USER 65532:65532
ENTRYPOINT ["/etcdhook"]
