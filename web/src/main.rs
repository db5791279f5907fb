//! stampo's demo page: what the browser runtime can do today, on the default model.
//!
//! Two panels: the model panel downloads the default GGUF from this page's origin with a
//! progress bar and reads its header in wasm; the schema panel compiles a JSON Schema as
//! you type into the GBNF stampo enforces and the keyword report (enforced, ignored,
//! refused), and checks a document against it. Generation joins when the engine runs in
//! the browser.

mod model_panel;
mod schema_panel;

use leptos::prelude::*;

use crate::model_panel::ModelPanel;
use crate::schema_panel::SchemaPanel;

fn main() {
    leptos::mount::mount_to_body(App);
}

#[component]
fn App() -> impl IntoView {
    view! {
        <header>
            <h1>"stampo"</h1>
            <p class="tagline">
                "Structured output from small language models, entirely in your browser: "
                "the output takes the exact shape of a JSON Schema or a GBNF grammar."
            </p>
        </header>
        <section class="notice" role="note">
            "This build compiles schemas and grammars and reads models in the browser. "
            "Text generation in the browser is not available yet: the model runtime is "
            "still being built."
        </section>
        <ModelPanel/>
        <SchemaPanel/>
    }
}
