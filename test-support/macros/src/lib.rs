//! `#[backends]` turns `async fn NAME(backend: Backend)` into the tests
//! `NAME::embedded` and `NAME::real`, each with the attributes written
//! below it (`#[tokio::test(...)]` among them). The test of a backend that
//! `GANTRY_TEST_BACKEND` does not choose passes at once, saying so.
//!
//! A procedural macro rather than `macro_rules!`: the test bodies stay
//! ordinary items that rustfmt formats.

use proc_macro::TokenStream;
use quote::quote;
use syn::{ItemFn, parse_macro_input};

/// Run the test on each backend; see the crate docs.
#[proc_macro_attribute]
pub fn backends(args: TokenStream, item: TokenStream) -> TokenStream {
    if !args.is_empty() {
        return syn::Error::new(
            proc_macro2::Span::call_site(),
            "#[backends] takes no arguments",
        )
        .to_compile_error()
        .into();
    }
    let mut case = parse_macro_input!(item as ItemFn);
    if case.sig.asyncness.is_none() || case.sig.inputs.len() != 1 {
        return syn::Error::new_spanned(
            &case.sig,
            "#[backends] expects `async fn name(backend: Backend)`",
        )
        .to_compile_error()
        .into();
    }
    let name = case.sig.ident.clone();
    // Doc comments stay on the case; everything else goes to the tests.
    let (docs, test_attrs): (Vec<_>, Vec<_>) =
        case.attrs.drain(..).partition(|a| a.path().is_ident("doc"));
    case.attrs = docs;
    quote! {
        #case

        mod #name {
            #(#test_attrs)*
            async fn embedded() {
                if !::gantry_test_support::Backend::Embedded.skip() {
                    super::#name(::gantry_test_support::Backend::Embedded).await
                }
            }

            #(#test_attrs)*
            async fn real() {
                if !::gantry_test_support::Backend::Real.skip() {
                    super::#name(::gantry_test_support::Backend::Real).await
                }
            }
        }
    }
    .into()
}
