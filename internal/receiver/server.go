package receiver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// Server serves a Receiver as a manager Runnable.
type Server struct {
	// Addr is the address to listen on (":9292").
	Addr string
	// CertDir, when set, holds tls.crt and tls.key (a mounted kubernetes.io/tls Secret): the
	// server speaks HTTPS with them, and takes a renewed pair without a restart. Empty serves
	// plain HTTP.
	CertDir string
	// Handler answers the requests (the Receiver).
	Handler http.Handler
	// Listening, when set, is told the address the server listens on.
	Listening func(net.Addr)
}

// NeedLeaderElection makes only the leader serve: the other replicas reconcile nothing, so a
// notification they took would wake nobody. A sender that reaches one retries (Distribution
// retries an endpoint until it answers).
func (s *Server) NeedLeaderElection() bool { return true }

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	srv := &http.Server{
		Handler: s.Handler,
		// Bounds a slow or idle sender: a notification is small.
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("webhook receiver: %w", err)
	}
	if s.CertDir != "" {
		cw, err := certwatcher.New(filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key"))
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("webhook receiver certificate: %w", err)
		}
		go func() {
			if err := cw.Start(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "watch webhook receiver certificate")
			}
		}()
		ln = tls.NewListener(ln, &tls.Config{GetCertificate: cw.GetCertificate, MinVersion: tls.VersionTLS12})
	}
	if s.Listening != nil {
		s.Listening(ln.Addr())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("webhook receiver: %w", err)
	}
	<-done
	return nil
}
