module gantry.dev/plugins/myresource-converter-go

go 1.26.0

require gantry.dev/go-sdk v0.0.0

// The SDK from this source tree, until it is published.
replace gantry.dev/go-sdk => ../../go-sdk
