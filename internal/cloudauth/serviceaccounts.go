package cloudauth

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The controller reads the ServiceAccount and asks for its token, for object-level identity.
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create

// tokenSeconds is the lifetime asked of a ServiceAccount token: the API server's shortest (10
// minutes). It is exchanged at once and never kept; what is kept is the cloud's answer.
const tokenSeconds = 600

// ServiceAccounts reads ServiceAccounts and requests their tokens.
type ServiceAccounts interface {
	Get(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	Token(ctx context.Context, sa *corev1.ServiceAccount, audiences []string) (string, error)
}

// APIServiceAccounts are the ServiceAccounts of the API server c talks to. c should read from the
// API server directly (not a cache: a cache of every ServiceAccount of the cluster costs memory
// for the few that are read).
func APIServiceAccounts(c client.Client) ServiceAccounts { return apiServiceAccounts{c: c} }

type apiServiceAccounts struct{ c client.Client }

func (a apiServiceAccounts) Get(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	var sa corev1.ServiceAccount
	if err := a.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sa); err != nil {
		return nil, err
	}
	return &sa, nil
}

func (a apiServiceAccounts) Token(ctx context.Context, sa *corev1.ServiceAccount, audiences []string) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: audiences, ExpirationSeconds: ptr.To[int64](tokenSeconds),
	}}
	if err := a.c.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", err
	}
	return req.Status.Token, nil
}
