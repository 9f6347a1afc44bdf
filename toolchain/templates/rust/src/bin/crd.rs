//! Prints the CRD of the parent kind as JSON: `gantry plugin crd .` runs it
//! natively, and `gantry plugin apply .` installs what it prints.

fn main() {
    gantry_sdk::print_crd::<__CRATE__::Greeting>();
}
