//! stampo's demo page: a model loaded in the runtime's worker, a JSON Schema compiled as you
//! type into the GBNF and keyword report stampo enforces, extraction under that schema beside
//! the same request without it, and batch extraction of many inputs.

mod batch_panel;
mod constraint;
mod extract_panel;
mod highlight;
mod judge;
mod model_panel;
mod runtime;
mod schema_panel;
mod settings;

use leptos::prelude::*;

use crate::batch_panel::BatchPanel;
use crate::constraint::{Constraint, PERSON};
use crate::extract_panel::ExtractPanel;
use crate::model_panel::ModelPanel;
use crate::schema_panel::SchemaPanel;
use crate::settings::{Settings, SettingsPanel};

fn main() {
    leptos::mount::mount_to_body(App);
}

#[component]
fn App() -> impl IntoView {
    let engine = RwSignal::new_local(None);
    let constraint = Constraint::new(PERSON);
    let settings = RwSignal::new(Settings::restore());
    view! {
        <header>
            <h1>"stampo"</h1>
            <p class="tagline">
                "Structured output from small language models, entirely in your browser: "
                "the output takes the exact shape of a JSON Schema or a GBNF grammar."
            </p>
        </header>
        <main>
            <ModelPanel engine=engine/>
            <SchemaPanel constraint=constraint/>
            <ExtractPanel engine=engine constraint=constraint settings=settings/>
            <BatchPanel engine=engine constraint=constraint settings=settings/>
            <SettingsPanel settings=settings/>
        </main>
    }
}
