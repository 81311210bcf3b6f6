package cloudauth

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	signerv4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/ecrpublic"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	fluxaws "github.com/fluxcd/pkg/auth/aws"

	"pkgsync.dev/pkgsync/api/v1alpha1"
)

func awsProvider(tr func(*http.Transport), timeout time.Duration) *provider {
	// The SDK's buildable client: the SDK adds AWS_CA_BUNDLE (or ca_bundle of the shared
	// config) to its roots, which it refuses to do for any other client.
	hc := awshttp.NewBuildableClient().WithTransportOptions(tr).WithTimeout(timeout)
	return &provider{
		name:           v1alpha1.RegistryProviderAWS,
		p:              fluxaws.Provider{Implementation: awsSDK{http: hc}},
		registries:     "an Amazon ECR registry",
		registryForm:   "ACCOUNT.dkr.ecr.REGION.amazonaws.com, or public.ecr.aws",
		annotationHint: "eks.amazonaws.com/role-arn: arn:aws:iam::ACCOUNT:role/NAME",
		roleHint: "the role's trust policy must let the cluster's OIDC provider's token for " +
			"system:serviceaccount:%s:%s (audience sts.amazonaws.com) assume it with sts:AssumeRoleWithWebIdentity; docs/operations.md, Amazon ECR",
		registryHint: "the role needs ecr:GetAuthorizationToken, and ecr:BatchGetImage and ecr:GetDownloadUrlForLayer on the repository",
		ambientHint:  "AWS credentials of this machine: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or aws sso login",
		controllerHint: "give the controller's pod an identity: IRSA (AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE) or EKS Pod Identity, " +
			"or name a ServiceAccount in spec.serviceAccountName",
	}
}

// awsSDK is fluxcd/pkg/auth's AWS Implementation with two changes. Every request goes through
// the Exchanger's bounded transport (transportOptions) instead of the one the library builds. And the
// clients are made from the SDK's own configuration (config.LoadDefaultConfig), so that the
// SDK's endpoint settings hold for every call: AWS_ENDPOINT_URL_STS and AWS_ENDPOINT_URL_ECR
// (or AWS_ENDPOINT_URL, and endpoint_url in the shared config file) for VPC endpoints, FIPS, or
// the stand-ins of the tests. The library builds the STS client of object-level identity and
// the ECR client from bare options, which read none of them.
type awsSDK struct{ http aws.HTTPClient }

func (a awsSDK) LoadDefaultConfig(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	// Later options win: the library's HTTP client is replaced.
	return config.LoadDefaultConfig(ctx, append(optFns, config.WithHTTPClient(a.http))...)
}

func (a awsSDK) AssumeRoleWithWebIdentity(ctx context.Context, params *sts.AssumeRoleWithWebIdentityInput, options sts.Options) (*sts.AssumeRoleWithWebIdentityOutput, error) {
	// AssumeRoleWithWebIdentity is not signed: the web identity token is the credential.
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(options.Region), config.WithHTTPClient(a.http),
		config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	if err != nil {
		return nil, err
	}
	return sts.NewFromConfig(cfg, func(o *sts.Options) {
		if options.BaseEndpoint != nil {
			o.BaseEndpoint = options.BaseEndpoint
		}
	}).AssumeRoleWithWebIdentity(ctx, params)
}

func (a awsSDK) registryConfig(ctx context.Context, cfg aws.Config) (aws.Config, error) {
	return config.LoadDefaultConfig(ctx, config.WithRegion(cfg.Region), config.WithHTTPClient(a.http),
		config.WithCredentialsProvider(cfg.Credentials))
}

func (a awsSDK) GetAuthorizationToken(ctx context.Context, cfg aws.Config) (any, error) {
	loaded, err := a.registryConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return ecr.NewFromConfig(loaded).GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
}

func (a awsSDK) GetPublicAuthorizationToken(ctx context.Context, cfg aws.Config) (any, error) {
	loaded, err := a.registryConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return ecrpublic.NewFromConfig(loaded).GetAuthorizationToken(ctx, &ecrpublic.GetAuthorizationTokenInput{})
}

var errNotUsed = errors.New("not used by pkgsync")

// DescribeCluster and PresignGetCallerIdentity serve the library's cluster access, which
// pkgsync does not use.
func (awsSDK) DescribeCluster(context.Context, *eks.DescribeClusterInput, eks.Options) (*eks.DescribeClusterOutput, error) {
	return nil, errNotUsed
}

func (awsSDK) PresignGetCallerIdentity(context.Context, func(*sts.PresignOptions), sts.Options) (*signerv4.PresignedHTTPRequest, error) {
	return nil, errNotUsed
}
