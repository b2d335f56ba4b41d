package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdhook/etcdhook/hooks"
	etcdsync "github.com/etcdhook/etcdhook/sync"
)

func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", ":8080", "listen address HOST:PORT (with --tls-cert-file: health, readiness and metrics only)")
	tlsAddr := fs.String("tls-addr", ":8443", "with --tls-cert-file: the hooks' TLS listen address")
	tlsCert := fs.String("tls-cert-file", "", "serve the hooks over TLS with this certificate (PEM; `etcdhook certs` writes it)")
	tlsKey := fs.String("tls-key-file", "", "the certificate's private key (PEM)")
	image := fs.String("image", envOr("ETCDHOOK_IMAGE", etcdsync.DefaultImage), "etcdhook image for the agent init container and Jobs (env ETCDHOOK_IMAGE)")
	seedOnly := fs.Bool("seed-bootstrap", false, "bootstrap every new cluster from a seed and joins one at a time, never from a static initial cluster of every member (docs/design/07-steps.md §7.1)")
	pull := fs.String("image-pull-policy", envOr("ETCDHOOK_IMAGE_PULL_POLICY", string(corev1.PullIfNotPresent)), "pull policy of member and Job images")
	frozen := fs.String("frozen-clock", "", "answer as if the time were this RFC 3339 instant (fixtures and demos only)")
	drain := fs.Duration("drain-delay", 5*time.Second, "on SIGTERM, fail /readyz this long before closing the listener")
	inFlight := fs.Int("max-in-flight", hooks.DefaultMaxInFlight(), "hook requests computed at once (2 per GOMAXPROCS); more wait in the queue or get 429")
	queue := fs.Int("max-queue", -1, "hook requests that may wait for a computation slot (-1: as many as --max-in-flight; 0: none, shed at once)")
	queueWait := fs.Duration("queue-wait", hooks.DefaultQueueWait, "longest a queued hook request waits before 429 Too Many Requests")
	maxBody := fs.Int64("max-body-bytes", hooks.MaxBodyBytes, "largest request body (413 beyond)")
	maxObjects := fs.Int("max-objects", hooks.MaxObjects, "most child and related objects in one request (413 beyond)")
	maxElements := fs.Int("max-elements", hooks.MaxElements, "most array elements in one request (413 beyond)")
	perParent := fs.Int("max-in-flight-per-parent", 1, "hook computations of one EtcdCluster at once (429 beyond); one Metacontroller sends one at a time")
	computeTimeout := fs.Duration("compute-timeout", hooks.DefaultComputeTimeout, "longest one sync is computed before it is abandoned (503, no answer); keep it below Metacontroller's hook timeout")
	addLogLevel(fs)
	// The chart passes the level in the environment; a flag wins.
	if v := os.Getenv("ETCDHOOK_LOG_LEVEL"); v != "" {
		if err := logLevel.UnmarshalText([]byte(v)); err != nil {
			return usageError{fmt.Errorf("ETCDHOOK_LOG_LEVEL: %w", err)}
		}
	}
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usageError{errors.New("--tls-cert-file and --tls-key-file go together")}
	}
	if *inFlight < 1 || *queueWait <= 0 || *maxBody < 1 || *maxObjects < 1 || *maxElements < 1 || *perParent < 1 || *computeTimeout <= 0 {
		return usageError{errors.New("--max-in-flight, --queue-wait, --max-body-bytes, --max-objects, --max-elements, --max-in-flight-per-parent and --compute-timeout must be positive")}
	}
	switch {
	case *queue == 0:
		*queue = -1 // hooks.Config: negative is no queue, 0 the default
	case *queue < 0:
		*queue = 0
	}
	log := jsonLogger()
	now := time.Now
	if *frozen != "" {
		t, err := time.Parse(time.RFC3339, *frozen)
		if err != nil {
			return usageError{fmt.Errorf("--frozen-clock: %w", err)}
		}
		now = func() time.Time { return t }
		log.Warn("clock frozen: answers use a fixed time", "now", t)
	}
	srv := hooks.New(hooks.Config{
		Options:  etcdsync.Options{Image: *image, ImagePullPolicy: corev1.PullPolicy(*pull), SeedBootstrap: *seedOnly},
		Now:      now,
		Logger:   log,
		LogLevel: &logLevel,

		MaxInFlight:          *inFlight,
		MaxQueue:             *queue,
		QueueWait:            *queueWait,
		MaxBodyBytes:         *maxBody,
		MaxObjects:           *maxObjects,
		MaxElements:          *maxElements,
		MaxInFlightPerParent: *perParent,
		ComputeTimeout:       *computeTimeout,
	})
	hs := srv.HTTPServer(*addr)
	servers := []*http.Server{hs}
	errc := make(chan error, 2)
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert-file: %w", err)
		}
		ts, err := srv.HTTPSServer(*tlsAddr, cert)
		if err != nil {
			return fmt.Errorf("--tls-cert-file: %w", err)
		}
		hs.Handler = srv.OpsOnly(*tlsAddr)
		servers = append(servers, ts)
		go func() { errc <- ts.ListenAndServeTLS("", "") }()
		log.Info("serving the hooks over TLS", "addr", *tlsAddr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { errc <- hs.ListenAndServe() }()
	log.Info("serving", "addr", *addr, "image", *image, "version", version,
		"maxInFlight", *inFlight, "queueWait", queueWait.String(), "maxBodyBytes", *maxBody)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Fail readiness first so the Service stops routing here, then finish in-flight requests.
	srv.Drain()
	log.Info("draining", "delay", drain.String())
	time.Sleep(*drain)
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	log.Info("stopped")
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
