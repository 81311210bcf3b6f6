package cloudauth

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/containers/azcontainerregistry"
	fluxazure "github.com/fluxcd/pkg/auth/azure"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func azureProvider(hc *http.Client) *provider {
	return &provider{
		name:         v1alpha1.RegistryProviderAzure,
		p:            fluxazure.Provider{Implementation: azureSDK{http: hc}},
		registries:   "an Azure Container Registry",
		registryForm: "NAME.azurecr.io (.azurecr.cn, .azurecr.us)",
		annotationHint: "azure.workload.identity/client-id: CLIENT_ID and azure.workload.identity/tenant-id: TENANT_ID " +
			"(of the managed identity or app registration)",
		roleHint: "the managed identity (or app registration) needs a federated identity credential for the cluster's OIDC issuer, " +
			"subject system:serviceaccount:%s:%s, audience api://AzureADTokenExchange; docs/operations.md, Azure Container Registry",
		registryHint: "the identity needs the AcrPull role on the registry",
		ambientHint:  "Azure credentials of this machine: az login, or AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET",
		controllerHint: "give the controller's pod an identity: Azure Workload Identity (AZURE_CLIENT_ID, AZURE_TENANT_ID, " +
			"AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST) or a managed identity, or name a ServiceAccount in spec.serviceAccountName",
	}
}

// azureSDK is fluxcd/pkg/auth's Azure Implementation with every request through the
// Exchanger's bounded client (transportOptions). The endpoints are the SDK's own settings:
// AZURE_AUTHORITY_HOST for Azure AD (azidentity reads it), the registry itself for the ACR
// exchange (https://REGISTRY/oauth2/exchange).
type azureSDK struct{ http *http.Client }

func (a azureSDK) clientOptions() azcore.ClientOptions {
	return azcore.ClientOptions{Transport: a.http}
}

// publicAuthorities are the Azure AD hosts of Azure's public and sovereign clouds, where MSAL's
// instance discovery (a request to login.microsoftonline.com) applies.
var publicAuthorities = []string{"login.microsoftonline.com", "login.microsoft.com", "login.windows.net", "login.chinacloudapi.cn", "login.microsoftonline.us"}

// noInstanceDiscovery is true when AZURE_AUTHORITY_HOST names an authority outside Azure's
// clouds (Azure Stack, a private or disconnected cloud, a test's stand-in): instance discovery
// would ask login.microsoftonline.com about it, which such an authority is not known to, and
// which a disconnected cluster cannot reach. azidentity's DisableInstanceDiscovery is for
// exactly these.
func noInstanceDiscovery() bool {
	raw := os.Getenv("AZURE_AUTHORITY_HOST")
	if raw == "" {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	return !slices.Contains(publicAuthorities, strings.ToLower(u.Hostname()))
}

// NewDefaultAzureCredential may shell out to the az and azd CLIs: the library asks for it only
// with fluxauth.WithAllowShellOut, which the CLI alone passes (Options.AllowShellOut).
func (a azureSDK) NewDefaultAzureCredential(options *azidentity.DefaultAzureCredentialOptions) (azcore.TokenCredential, error) {
	o := *options
	o.ClientOptions = a.clientOptions()
	o.DisableInstanceDiscovery = o.DisableInstanceDiscovery || noInstanceDiscovery()
	return azidentity.NewDefaultAzureCredential(&o)
}

// NewDefaultAzureCredentialWithoutShellOut is the controller's own identity: the environment's
// service principal, Azure Workload Identity, or a managed identity, tried in that order.
func (a azureSDK) NewDefaultAzureCredentialWithoutShellOut(options *azidentity.DefaultAzureCredentialOptions) (azcore.TokenCredential, error) {
	var chain []azcore.TokenCredential
	noDiscovery := noInstanceDiscovery()
	if c, err := azidentity.NewEnvironmentCredential(&azidentity.EnvironmentCredentialOptions{ClientOptions: a.clientOptions(), DisableInstanceDiscovery: noDiscovery}); err == nil {
		chain = append(chain, c)
	}
	if c, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{ClientOptions: a.clientOptions(), DisableInstanceDiscovery: noDiscovery}); err == nil {
		chain = append(chain, c)
	}
	if c, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ClientOptions: a.clientOptions()}); err == nil {
		chain = append(chain, c)
	}
	return azidentity.NewChainedTokenCredential(chain, nil)
}

func (a azureSDK) NewClientAssertionCredential(tenantID, clientID string, getAssertion func(context.Context) (string, error), options *azidentity.ClientAssertionCredentialOptions) (azcore.TokenCredential, error) {
	o := azidentity.ClientAssertionCredentialOptions{}
	if options != nil {
		o = *options
	}
	o.ClientOptions = a.clientOptions()
	o.DisableInstanceDiscovery = o.DisableInstanceDiscovery || noInstanceDiscovery()
	return azidentity.NewClientAssertionCredential(tenantID, clientID, getAssertion, &o)
}

// ExchangeAADAccessTokenForACRRefreshToken makes its own client for the registry (service, the
// registry host): the library's is built with its own HTTP client.
func (a azureSDK) ExchangeAADAccessTokenForACRRefreshToken(ctx context.Context, _ *azcontainerregistry.AuthenticationClient, grantType azcontainerregistry.PostContentSchemaGrantType, service string, options *azcontainerregistry.AuthenticationClientExchangeAADAccessTokenForACRRefreshTokenOptions) (azcontainerregistry.AuthenticationClientExchangeAADAccessTokenForACRRefreshTokenResponse, error) {
	var none azcontainerregistry.AuthenticationClientExchangeAADAccessTokenForACRRefreshTokenResponse
	c, err := azcontainerregistry.NewAuthenticationClient("https://"+service, &azcontainerregistry.AuthenticationClientOptions{ClientOptions: a.clientOptions()})
	if err != nil {
		return none, err
	}
	return c.ExchangeAADAccessTokenForACRRefreshToken(ctx, grantType, service, options)
}

// NewManagedClustersClient serves the library's AKS cluster access, which pkgsync does not use.
func (azureSDK) NewManagedClustersClient(string, azcore.TokenCredential, *arm.ClientOptions) (fluxazure.AKSClient, error) {
	return nil, errNotUsed
}
